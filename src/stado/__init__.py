"""stado: jobs across a fleet, queued as objects in an object store.

Its layers, each a folder, each importing only those before it: core (pure: records, keys, the spec, admission),
objectstore (the store's one interface and its backends), store (stado's conditional writes, the store's clock,
transfers), queue (submitting, reading, pausing, schedules, what a job carries), jobs (every move of a job, and the
reaper), agent (one worker, and the keeper beside each job), commands (what the reading and repairing commands do),
and the two front ends, cli and ui. docs/architecture.md draws the tree.
"""
