"""One small object-store interface (base.py) and its backends, one module each."""
from .base import (AccessDenied, AlreadyExists, Entry, NotFound, ObjectStore, PreconditionFailed, StoreError,
                   StoreUnavailable, Version)

__all__ = ["AccessDenied", "AlreadyExists", "Entry", "NotFound", "ObjectStore", "PreconditionFailed", "StoreError",
           "StoreUnavailable", "Version"]
