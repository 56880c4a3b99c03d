"""What an agent knows of the queue between its polls, so that a poll costs what changed, not what waits.

Each poll lists one bounded page of the claim-order index (ready/: priority, then creation time; see
readyindex.py), whatever the queue holds. An entry is read (GET) only when its listed version is new to
this agent; an entry known to be unreadable, not for this agent, or held up is skipped until its version
changes. A job waiting for another job's artifacts costs nothing per waiting job: producers are looked
up once per poll whatever number of jobs wait on them, a producer still listed in queue/ or running/
needs no read at all (running/ is listed at most once per poll, and only while something waits), and a
producer's terminal record, final once written, is remembered for good. A job's dependencies (`--after-success`
and the others) are looked up the same way, through the same memory: the jobs depended on are producers too.
"""
from runkit.core.ids import is_uuid

from ..core import dependencies
from ..core import documents as d
from ..core import keys
from ..store.cas import read, remove
from ..objectstore.base import Entry, NotFound, ObjectStore, Version
from ..queue.pause import read_record

READY, WAIT = dependencies.READY, dependencies.WAIT


class QueueKnowledge:
    def __init__(self, store: ObjectStore):
        self.store = store
        # index key -> (the index entry's version, the ledger entry's document, the ledger entry's version)
        self._docs: dict[str, tuple[Version, d.Job, Version]] = {}
        self._fresh: set[str] = set()                       # index keys whose ledger entry was read this poll
        self._skip: dict[str, Version] = {}                 # queue key -> the version found corrupt or not for us
        self.blocked: set[str] = set()                      # job ids held up by a corrupt record elsewhere
        self._final: dict[str, str] = {}                    # producer id -> its terminal state (never changes)
        self._queued_ids: set[str] = set()
        self._running_ids: set[str] | None = None           # listed lazily, once per poll
        self._looked_up: dict[str, str | None] = {}         # producer id -> terminal state found this poll
        self._head_blocked = False
        self._cursor: str | None = None
        self._passed: dict[str, float] = {}                # index key -> when a spread pass first passed it over
        self.pause_entry: Entry | None = None               # the pause record as this poll's listing showed it
        self._pause_read: tuple[Version, dict] | None = None  # the pause record read at that version

    def list_window(self, window: int) -> tuple[list[tuple[str, Entry]], list[Entry]]:
        """One poll's view of the queue: the first `window` entries of the claim-order index (highest
        priority, then oldest), and, when all of those are taken up by jobs this agent cannot start now, one
        more page further on (a cursor that wraps round), so jobs behind a head of unclaimable ones are
        reached too. Returns (job entries in claim order, entries that are not job entries)."""
        head = self.store.list_page(keys.READY, limit=window)
        pages = [head]
        if len(head) == window and self._head_blocked:
            further = self.store.list_page(keys.READY, start_after=self._cursor or head[-1].key, limit=window)
            self._cursor = further[-1].key if len(further) == window else None
            pages.append(further)
        jobs, strays, seen = [], [], set()
        self.pause_entry = None
        for entry in (e for page in pages for e in page):
            if entry.key == keys.QUEUE_PAUSE:
                self.pause_entry = entry
                continue
            job_id = keys.job_id_of_ready(entry.key)
            if job_id is None or not is_uuid(job_id):
                strays.append(entry)
            elif job_id not in seen:
                seen.add(job_id)
                jobs.append((job_id, entry))
        listed = {entry.key for _, entry in jobs}
        for key in [k for k in self._docs if k not in listed]:
            del self._docs[key]
        for key in [k for k in self._skip if k not in listed]:
            del self._skip[key]
        self._passed = {k: t for k, t in self._passed.items() if k in listed}
        # A producer's terminal state is kept while a job still listed waits on it, not for good: an agent that runs
        # for months would otherwise remember every producer it ever looked up.
        wanted = {ref.get("job") for _, doc, _ in self._docs.values() for ref in doc.spec.inputs or ()}
        wanted |= {job for _, doc, _ in self._docs.values() for _, job in dependencies.edges(doc.spec)}
        self._final = {producer: state for producer, state in self._final.items() if producer in wanted}
        self._queued_ids = seen
        self._fresh = set()
        self._running_ids = None
        self._looked_up = {}
        return jobs, strays

    def pause(self) -> dict | None:
        """The pause record this poll's listing showed (read once for each version of it), or None: not paused."""
        entry = self.pause_entry
        if entry is None:
            self._pause_read = None
            return None
        if self._pause_read is None or self._pause_read[0] != entry.version:
            try:
                blob = self.store.get(keys.QUEUE_PAUSE)
            except NotFound:  # resumed since the listing
                self._pause_read = None
                return None
            self._pause_read = (blob.version, read_record(blob.data))
        return self._pause_read[1]

    def head_blocked(self, blocked: bool) -> None:
        """Whether the last pass found nothing it could start in the window's head (then the next pass also
        looks one page further)."""
        self._head_blocked = blocked
        if not blocked:
            self._cursor = None

    def document(self, job_id: str, entry: Entry) -> tuple[d.Job, Version] | None:
        """The job's ledger entry (queue/<id>.json) and its version: from memory while the index entry's version
        is unchanged, else one GET of the ledger itself (the index entry is a copy of it, so reading the copy
        and then the ledger would read the same document twice). CorruptDocument if it cannot be read; None if
        it is gone (claimed or ended since), and then the index entry, which points nowhere, is removed at its
        listed version."""
        known = self._docs.get(entry.key)
        if known is not None and known[0] == entry.version:
            return known[1], known[2]
        found = read(self.store, keys.queued(job_id), job_id)
        if found is None:
            self._docs.pop(entry.key, None)
            remove(self.store, entry.key, entry.version)
            return None
        doc, version = found
        self._docs[entry.key] = (entry.version, doc, version)
        self._fresh.add(entry.key)
        return doc, version

    def ledger(self, job_id: str, entry: Entry) -> tuple[d.Job, Version] | None:
        """The ledger entry as a claim must take it: the one read this poll as it was read (the claim's own
        conditional writes tell a stale read: see jobs.claim), else read again now (remembered from an earlier
        poll, it may be old). None, and the index entry removed, when it is gone."""
        known = self._docs.get(entry.key)
        if entry.key in self._fresh and known is not None and known[0] == entry.version:
            return known[1], known[2]
        self._docs.pop(entry.key, None)
        return self.document(job_id, entry)

    def forget(self, key: str) -> None:
        self._docs.pop(key, None)

    def passed_over(self, keys: list[str], mono: float) -> None:
        """A spread pass claimed past these index entries (left to agents of lower rank): since when, kept."""
        for key in keys:
            self._passed.setdefault(key, mono)

    def overdue(self, key: str, mono: float, after: float) -> bool:
        """Passed over for `after` seconds or more: the agent it was left to has not come for it (full, stopped,
        or gone while its record still counts as live); it is then walked first, in order."""
        since = self._passed.get(key)
        return since is not None and mono - since >= after

    def skip(self, entry: Entry) -> None:
        """The entry's document, at this version, is corrupt or not for this agent: not read again until it changes."""
        self._skip[entry.key] = entry.version

    def skipped(self, job_id: str, entry: Entry) -> bool:
        """Known corrupt or not for this agent at this version, or held up until the slow cadence."""
        return self._skip.get(entry.key) == entry.version or job_id in self.blocked

    def inputs_state(self, queued: d.Job) -> str:
        """READY, WAIT (a producer has not finished) or the reason an input can never be delivered.
        CorruptDocument if a producer's terminal record cannot be read."""
        for ref in queued.spec.inputs or ():
            if ref.get("upload"):
                continue  # stored before the job was queued: nothing to wait for
            state = self._producer_state(ref["job"])
            if state is None:
                return WAIT
            if state != "completed":
                return f"input {ref['job']}:{ref['name']}: its job ended {state}"
        return READY

    def dependencies_state(self, queued: d.Job) -> "str | dict":
        """READY, WAIT (a job depended on has not ended) or, when a condition can never hold, what the dependent's
        dependency_failed record says of it (dependencies.judge). CorruptDocument as inputs_state."""
        return dependencies.judge(queued.spec, self._producer_state)

    def _producer_state(self, producer: str) -> str | None:
        """The producer's terminal state, or None while it has none."""
        if producer in self._final:
            return self._final[producer]
        if producer in self._queued_ids:
            return None
        if self._running_ids is None:
            self._running_ids = {job_id for e in self.store.list(keys.RUNNING)
                                 if (job_id := keys.job_id_of(e.key, keys.RUNNING))}
        if producer in self._running_ids:
            return None
        if producer not in self._looked_up:
            self._looked_up[producer] = None
            for state in keys.TERMINAL_STATES:
                if read(self.store, keys.terminal(state, producer), producer) is not None:
                    self._final[producer] = self._looked_up[producer] = state
                    break
        return self._looked_up[producer]


# -- the claim pass ------------------------------------------------------------------------------------
