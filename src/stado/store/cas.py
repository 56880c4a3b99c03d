"""Conditional writes of stado's documents, beside the store interface: read with version, create-if-absent,
put-if-match and delete-if-match, each telling our own write (a retried request that landed) from
another writer's by the nonce every document carries.
"""
import os

from runkit.core import jsonfast

from ..core import documents as d
from ..core.errors import CorruptDocument
from ..objectstore.base import (AlreadyExists, NotFound, ObjectStore, PreconditionFailed, StoreError, StoreUnavailable, Version)


def new_nonce() -> str:
    return os.urandom(12).hex()


def read(store: ObjectStore, key: str, job_id: str | None = None) -> tuple[d.Job, Version] | None:
    """The decoded document and its version, None if absent; CorruptDocument if unreadable."""
    try:
        blob = store.get(key)
    except NotFound:
        return None
    return d.decode(key, blob.data, job_id), blob.version


def create(store: ObjectStore, key: str, doc: d.Job) -> Version | None:
    """Create-if-absent. None when another writer's document is there; our own retried request that
    landed counts as success (the nonce tells). A connection dropped mid-request leaves the same
    question, settled the same way; if even the read-back fails, the store error goes to the caller."""
    return create_seen(store, key, doc)[0]


def create_seen(store: ObjectStore, key: str,
                doc: d.Job) -> tuple[Version | None, tuple[d.Job, Version] | None]:
    """create(), with what the read-back found when another writer's document is there: (its document, its
    version); None beside a refused create when the key was gone again or held something unreadable."""
    try:
        return store.put_if_absent(key, d.encode(doc)), None
    except AlreadyExists:
        try:
            blob = store.get(key)
        except NotFound:
            return None, None
    except StoreUnavailable as dropped:
        try:
            blob = store.get(key)
        except NotFound:
            raise dropped from None  # it did not land (or landed and is gone): not another writer's win
        except StoreError:
            raise dropped from None
    try:
        current = d.decode(key, blob.data)
    except CorruptDocument:
        return None, None
    return (blob.version, None) if current.nonce == doc.nonce else (None, (current, blob.version))


def replace(store: ObjectStore, key: str, doc: d.Job, version: Version) -> tuple[Version | None, d.Job | None]:
    """Put-if-match. (new version, None) on success; (None, current document or None if gone) when
    another writer moved first. A retried request of ours that landed counts as success."""
    new_version, found = replace_seen(store, key, doc, version)
    return new_version, None if found is None else found[0]


def replace_seen(store: ObjectStore, key: str, doc: d.Job,
                 version: Version) -> tuple[Version | None, tuple[d.Job, Version] | None]:
    """replace(), with the version of the document read when another writer moved first: (current, its version)."""
    try:
        return store.put_if_match(key, d.encode(doc), version), None
    except (PreconditionFailed, StoreUnavailable) as e:
        try:
            found = read(store, key)
        except StoreError:
            raise e from None
        if found is None:
            return None, None
        current, current_version = found
        if current.nonce == doc.nonce:
            return current_version, None
        if isinstance(e, StoreUnavailable) and current_version == version:
            raise  # it did not land and nobody moved first: the caller's next pass tries again
        return None, found


def remove(store: ObjectStore, key: str, version: Version) -> bool:
    """Delete the key only if it still holds `version` (the version this writer read or wrote). False
    when it is gone or another writer has moved it on: a stale writer never removes a newer document."""
    return store.delete_if_match(key, version)


def read_json(store: ObjectStore, key: str) -> tuple[dict, Version] | None:
    """A document that is not a job's (a schedule, ...): the decoded object and its version, None if
    absent, CorruptDocument if it is not a JSON object."""
    try:
        blob = store.get(key)
    except NotFound:
        return None
    try:
        doc = jsonfast.loads(blob.data)
    except ValueError as e:
        from ..core.brief import brief

        raise CorruptDocument(key, f"not JSON: {brief(str(e), 80)}") from None
    if not isinstance(doc, dict):
        raise CorruptDocument(key, "not a JSON object")
    return doc, blob.version


def replace_json(store: ObjectStore, key: str, doc: dict, version: Version) -> Version | None:
    """Put-if-match of a document that is not a job's: its new version; None when another writer moved it first."""
    try:
        return store.put_if_match(key, d.encode(doc), version)
    except PreconditionFailed:
        return None
