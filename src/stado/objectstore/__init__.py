"""One small object-store interface (base.py) and its backends, one module each.

open_store / store_from_environment (connect.py) pick a backend from a URL or STADO_CONFIG; they are
re-exported lazily so that `import stado.objectstore` stays as cheap as base.py.
"""
from .base import (AccessDenied, AlreadyExists, Blob, ConfigError, Entry, InvalidKey, NotFound, ObjectStore, PreconditionFailed, StoreError, StoreUnavailable, StoreUnwell, Version)

__all__ = ["AccessDenied", "AlreadyExists", "Blob", "ConfigError", "Entry", "InvalidKey", "NotFound", "ObjectStore",
           "PreconditionFailed", "StoreError", "StoreUnavailable", "StoreUnwell", "Version", "open_store",
           "store_from_environment"]


def __getattr__(name):
    if name in ("open_store", "store_from_environment"):
        from . import connect
        return getattr(connect, name)
    raise AttributeError(name)
