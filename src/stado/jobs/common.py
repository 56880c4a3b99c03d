"""What the transitions share."""

from runkit.core.records import record

from ..core import keys
from ..store.cas import read
from ..core.errors import CorruptDocument

CONFLICT_RETRIES = 8


class Overtaken(record("Overtaken", "current version", defaults=(None,))):
    """A conditional write lost to another writer that moved first: `current` is what holds the key now (None: the
    key is gone), and `version` its version when the loser read it (None: not known). (jobman's Fenced is an
    exception of its supervisor's; this is a value the caller decides on.)"""

    __slots__ = ()


def running_records(store, skip: frozenset = frozenset(), known: dict | None = None):
    """Every running record, from one LIST of running/: (job id, (doc, version), None, listed entry) for each,
    with None for the pair if it went meanwhile, or (job id, None, the CorruptDocument, entry) for one that
    cannot be read. The entry's `modified` is the store's time of the version listed (the reaper's clock).
    `skip`: job ids whose records are not read (nor yielded): an agent's own slots, for its reaper.
    `known`: job id -> (doc, version) read earlier by the caller; a record listed at that very version is not read
    again (every write of a running document has bytes of its own, so its version names it on every backend)."""
    for entry in store.list(keys.RUNNING):
        job_id = keys.job_id_of(entry.key, keys.RUNNING)
        if job_id is None or job_id in skip:
            continue
        seen = None if known is None else known.get(job_id)
        if seen is not None and seen[1] == entry.version:
            yield job_id, seen, None, entry
            continue
        try:
            found = read(store, entry.key, job_id)
        except CorruptDocument as e:
            yield job_id, None, e, entry
        else:
            yield job_id, found, None, entry
