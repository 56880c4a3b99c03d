"""stado: jobs across a fleet, queued as objects in an object store."""
