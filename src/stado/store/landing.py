"""Whether a write whose answer was lost landed: how long it is tried again (Patience), a create-if-absent tried
until the store's answers tell (create), what a failed request's error says of it (may_have_landed), and a plain
write tried until it lands (retried). A submit and a cancel both stand on these: what they report is what the
store holds."""
import time

from ..objectstore.base import AccessDenied, AlreadyExists, ObjectStore, StoreError

LANDED, NOT_LANDED, UNKNOWN, TAKEN, EXISTING = "landed", "not landed", "unknown", "taken", "existing"


class Patience:
    """How long a write whose answer was lost is tried again: backing off from 0.1 s to 2 s between tries, for
    `seconds` from its first failure."""

    __slots__ = ("seconds", "until", "delay")

    def __init__(self, seconds: float):
        self.seconds, self.delay = seconds, 0.1
        self.until: float | None = None

    def another(self) -> bool:
        """Wait before the next try: False, at once, when the bound has passed."""
        now = time.monotonic()
        if self.until is None:
            self.until = now + self.seconds
        if now >= self.until:
            return False
        time.sleep(min(self.delay, self.until - now))
        self.delay = min(self.delay * 2, 2.0)
        return True


def create(store: ObjectStore, key: str, data: bytes, mine, patience: Patience, *, exists_is_ours: bool):
    """Create-if-absent `key` until the store's answers tell what became of it: (LANDED, None), (TAKEN, what
    another writer wrote there), or (NOT_LANDED or UNKNOWN, the last error). `mine()` reads back: True when our
    write is there (or what it became), False when nothing is, or another writer's record. `exists_is_ours`: the
    key is ours alone (a fresh job id), so a refused create means one of our own tries landed, whatever moved it
    on since."""
    reached = later = False
    error: StoreError | None = None
    while True:
        try:
            store.put_if_absent(key, data)
            return LANDED, None
        except AlreadyExists:
            exists = True
        except StoreError as e:
            exists, error = False, e
            landed, in_flight = may_have_landed(e)
            reached, later = reached or landed, later or in_flight
            if not reached:
                return NOT_LANDED, e  # no try of ours reached the store: nothing to read back, nothing to wait for
        try:
            seen = mine()
        except StoreError as e:
            seen, error = None, error or e
        if seen is True:
            return LANDED, None
        if seen is not None and seen is not False:
            return TAKEN, seen
        if exists and exists_is_ours:
            return LANDED, None  # a try of ours landed (the id is ours alone); the job moved on, or was not read
        if not patience.another():
            # The last read-back answers for every try made before it, unless one may still be on its way.
            return (NOT_LANDED if seen is False and not later else UNKNOWN), error


def may_have_landed(error: StoreError) -> tuple[bool, bool]:
    """(whether the write that failed with `error` may have landed, whether it may still land later).

    A store of this host (the local directory) answers in the call: once it has raised, nothing of the write is
    in flight, though it may have landed before the failure. A cloud store's client (obstore) retries on its own:
    its error says how many retries it made and why the last try failed. Only a single try tells anything: one that
    never connected sent nothing, and one the server refused (a 4xx but 408 and 429, or 501) stored nothing; after
    any other answer (a 5xx, which a proxy may give for a write that committed) the write is decided by now; a
    connection lost after sending, a timeout, or any retry before, may still land."""
    if isinstance(error, AccessDenied):
        return False, False
    cause = error.__cause__
    if cause is None:
        return True, False
    lines = {line.strip() for line in str(cause).splitlines()}
    if "retries: 0," not in lines:
        return True, True
    if "kind: Connect," in lines:
        return False, False
    status = _status(str(cause))
    if status is not None:
        refused = (400 <= status < 500 and status not in (408, 429)) or status == 501
        return (False, False) if refused else (True, False)
    return True, True


def _status(text: str) -> int | None:
    """The HTTP status obstore's error reports, if the server answered."""
    for marker in ("status code: ", "status: "):
        at = text.find(marker)
        digits = text[at + len(marker):at + len(marker) + 3] if at >= 0 else ""
        if digits.isdigit():
            return int(digits)
    return None


def retried(patience: Patience, write, *args) -> StoreError | None:
    """A plain write (an overwrite with the same bytes changes nothing), write(*args), tried until it lands: None,
    or the last error once the bound has passed."""
    while True:
        try:
            write(*args)
            return None
        except StoreError as e:
            if isinstance(e, AccessDenied) or not patience.another():
                return e
