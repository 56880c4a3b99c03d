"""`stado schedule`: jobs submitted on a cron; each submission is an ordinary job object.

A schedule is one document, `schedules/<name>.json`: the cron expression (parsed by cronsim), its time
zone, the job spec, whether it is paused, and `last_fired`, the latest fire time dealt with. Every agent
runs the firing step, whatever their number, and each fire time still produces exactly one job:

1. the fire time's job id is derived from the schedule's uid and the fire time (a UUIDv7 whose clock is
   the fire time), so every agent that fires it writes the same `queue/<id>.json`, create-if-absent:
   one wins, the others find it there;
2. then `last_fired` moves on by put-if-match on the schedule document, so later passes never fire that
   time again. A crash between the two leaves `last_fired` behind: the next pass writes the same id
   again, and if that job had already been claimed or had ended, the entry is a leftover the claim
   removes without running it (a claim starts nothing beside a running or terminal record).

Missed fire times (no agent ran at the time) are skipped, as Slurm's scrontab and Nomad's periodic jobs
do: a fire time is submitted only within `grace` seconds of it; older ones are counted as skipped. Fire times
within grace are each submitted, in order (an agent that stalled past two of them submits both). Agents judge
fire times by the store's clock (storeclock.py), never their own: one whose clock runs ahead would fire early
and move `last_fired` past the times the others were about to fire.
The firing step takes the time as an argument (tests drive it across minute boundaries).
"""
from datetime import datetime, timedelta, UTC

from runkit.core.ids import uuid7_derived

from ..core import documents as d
from ..core import keys
from ..store.cas import create, new_nonce, read_json, remove, replace_json
from ..core.errors import BadInput, Conflict, CorruptDocument, StadoError
from ..objectstore.base import AlreadyExists, NotFound, ObjectStore
from .readyindex import index
from ..core.spec import check_name

DEFAULT_GRACE = 120.0  # seconds after a fire time within which it is still submitted
REFRESH_SECONDS = 30.0  # how often an agent lists schedules/ to learn of new, changed or removed ones
FIRES_PER_TICK = 20     # fire times dealt with in one tick (the rest in the next: an agent never stalls on one)


class NoSuchSchedule(StadoError):
    exit_code = 3


def parse_cron(expr: str, tz: str = "UTC"):
    """(cron expression, zone) checked; BadInput in one line otherwise."""
    from cronsim import CronSim, CronSimError

    if not isinstance(expr, str) or not isinstance(tz, str):
        raise BadInput(f"cron expression {expr!r} (zone {tz!r}) is not text: give five fields, e.g. '0 3 * * 1-5'")
    zone = _zone(tz)
    try:
        CronSim(expr, datetime.now(zone))
    except (CronSimError, ValueError) as e:
        raise BadInput(f"cron expression {expr!r} is not valid ({e}): use five fields, minute hour day month weekday, "
                       "e.g. '*/15 * * * *' or '0 3 * * 1-5' (or six, seconds first)") from None
    return expr, zone


def _zone(tz: str):
    if tz in ("UTC", "utc"):
        return UTC
    try:
        from zoneinfo import ZoneInfo

        return ZoneInfo(tz)
    except (ValueError, KeyError, OSError, ImportError):
        raise BadInput(f"time zone {tz!r} is not known: use an IANA name such as Europe/Paris, or UTC") from None


def latest_fire(doc: dict, now: float) -> float | None:
    """The latest fire time at or before `now` (unix seconds), None if the schedule never fired so far."""
    from cronsim import CronSim

    expr, zone = parse_cron(doc["cron"], doc.get("tz") or "UTC")
    start = datetime.fromtimestamp(now, zone) + timedelta(microseconds=1)
    fire = next(CronSim(expr, start, reverse=True), None)
    return None if fire is None else fire.timestamp()


def next_fire(doc: dict, after: float) -> float:
    from cronsim import CronSim

    expr, zone = parse_cron(doc["cron"], doc.get("tz") or "UTC")
    return next(CronSim(expr, datetime.fromtimestamp(after, zone))).timestamp()


def fire_job_id(doc: dict, fire_time: float) -> str:
    return uuid7_derived(int(fire_time * 1000), f"{doc['uid']}:{fire_time:.3f}".encode())


# -- managing schedules ---------------------------------------------------------------------------------

def add(store: ObjectStore, name: str, cron: str, spec: dict, *, tz: str = "UTC", by: str,
        now: float) -> dict:
    t = now
    check_name(name)
    parse_cron(cron, tz)
    doc = {"schema": 1, "name": name, "cron": cron, "tz": tz, "spec": spec, "paused": False, "uid": new_nonce(),
           "created_at": d.iso(t), "created_by": by, "last_fired": t, "skipped": 0, "fired": 0,
           "generation": 1, "nonce": new_nonce()}
    try:
        store.put_if_absent(keys.schedule(name), d.encode(doc))
    except AlreadyExists:
        # A create tried again after its answer was lost meets its own first try: the nonce tells.
        try:
            found = read_json(store, keys.schedule(name))
        except CorruptDocument:
            found = None
        if found is None or found[0].get("nonce") != doc["nonce"]:
            raise BadInput(f"schedule {name!r} already exists: remove it first with `stado schedule rm {name}`") \
                from None
    return doc


def refuse_taken(store: ObjectStore, name: str) -> None:
    """BadInput if a schedule of that name exists (told before anything is stored for a new one)."""
    try:
        store.head(keys.schedule(check_name(name)))
    except NotFound:
        return
    raise BadInput(f"schedule {name!r} already exists: remove it first with `stado schedule rm {name}`")


def get(store: ObjectStore, name: str):
    """(the schedule, its version); NoSuchSchedule, or CorruptDocument naming `stado schedule rm NAME`."""
    check_name(name)
    key = keys.schedule(name)
    try:
        found = read_json(store, key)
    except CorruptDocument as e:
        raise CorruptDocument(key, f"{e.reason}; `stado schedule rm {name}` removes it") from None
    if found is None:
        raise NoSuchSchedule(f"no schedule named {name!r}: see `stado schedule list`")
    return checked(key, found[0]), found[1]


def checked(key: str, doc: dict) -> dict:
    """A schedule document as every reader needs it (its name, cron text and spec object); CorruptDocument
    otherwise, whose text says how to remove it."""
    name = keys.schedule_name(key)
    if doc.get("name") != name or not isinstance(doc.get("cron"), str) or not isinstance(doc.get("spec"), dict):
        raise CorruptDocument(key, f"not a schedule: its name, cron or spec is missing or wrong; `stado schedule rm "
                                   f"{name}` removes it")
    return doc


def remove_schedule(store: ObjectStore, name: str) -> dict | None:
    """Remove the schedule (the document removed), or a corrupt document at its key (None): either way it fires no
    more. Conflict when another writer changed it meanwhile."""
    refused, removed = False, None  # a remove returned False (base.py: that version no longer stands), and what it read
    for _ in range(8):  # agents move last_fired at every fire: read again and remove that version
        try:
            doc, version = get(store, name)
        except NoSuchSchedule:
            if refused:  # gone since: removed by that remove's own first try (its answer lost) or by another
                return removed
            raise
        except CorruptDocument:
            try:
                doc, version = None, store.head(keys.schedule(name)).version
            except NotFound:
                if refused:
                    return removed
                raise NoSuchSchedule(f"no schedule named {name!r}: see `stado schedule list`") from None
        if remove(store, keys.schedule(name), version):
            return doc
        refused, removed = True, doc
    raise Conflict(f"schedule {name!r} kept changing while removing it; run the command again")


def set_paused(store: ObjectStore, name: str, paused: bool, *, by: str, now: float) -> tuple[dict, bool]:
    """(the schedule, whether it changed)."""
    t = now
    for _ in range(8):
        doc, version = get(store, name)
        if bool(doc.get("paused")) == paused:
            return doc, False
        new = dict(doc, paused=paused, paused_by=by if paused else None, paused_at=d.iso(t) if paused else None,
                   generation=doc.get("generation", 0) + 1, nonce=new_nonce())
        if replace_json(store, keys.schedule(name), new, version) is not None:
            return new, True
    raise Conflict(f"schedule {name!r} kept changing; run the command again")


def list_schedules(store: ObjectStore, *, now: float, problems: list[str] | None = None) -> list[dict]:
    """Every schedule with its next fire time. A corrupt one is left out and described in `problems` (with how to
    remove it), so the healthy ones are still listed; without a `problems` list, CorruptDocument is raised."""
    t = now
    out = []
    for entry in store.list(keys.SCHEDULES):
        try:
            found = read_json(store, entry.key)
            if found is None:
                continue
            doc = checked(entry.key, found[0])
        except CorruptDocument as e:
            if problems is None:
                raise
            problems.append(str(e) if e.reason.endswith("removes it")
                            else f"{e}; `stado schedule rm {keys.schedule_name(entry.key)}` removes it")
            continue
        try:
            upcoming = None if doc.get("paused") else d.iso(next_fire(doc, t))
        except (StadoError, KeyError, TypeError, ValueError, AttributeError):
            upcoming = None
        out.append(dict(doc, next_fire=upcoming))
    return out


# -- firing --------------------------------------------------------------------------------------------

def due_fire(doc: dict, now: float, grace: float = DEFAULT_GRACE) -> float | None:
    """The earliest fire time after `last_fired` that is due at `now` and still within `grace` of it, or None."""
    if doc.get("paused"):
        return None
    last = float(doc.get("last_fired") or 0)
    fire = next_fire(doc, max(last, now - grace))
    return fire if fire <= now else None


def _missed(doc: dict, last: float, until: float, cap: int = 100_000) -> tuple[int, float | None]:
    """How many fire times fall in (last, until], and the latest of them (counting stops at `cap`)."""
    count, latest, t = 0, None, last
    while count < cap:
        t = next_fire(doc, t)
        if t > until:
            break
        count, latest = count + 1, t
    return count, latest


def fire_one(store: ObjectStore, doc: dict, version, *, now: float, grace: float = DEFAULT_GRACE,
             submitter: str) -> tuple[str | None, tuple | None]:
    """Deal with the earliest fire time not dealt with yet: submit it if it is due and within `grace` (fire
    times older than that, missed while no agent ran, are counted as skipped on the way), then move `last_fired`
    on to it. (A line saying what was done or None, (version, schedule) as this call wrote it or None when it
    wrote nothing or another agent moved the schedule on first.) Called again while something is due, each fire
    time is submitted once and in order, even after an agent stalled past several of them."""
    if doc.get("paused"):
        return None, None
    last = float(doc.get("last_fired") or 0)
    skipped, latest_skipped = _missed(doc, last, now - grace) if now - grace > last else (0, None)
    fire = due_fire(doc, now, grace)
    if fire is None and not skipped:
        return None, None
    lines = []
    if skipped:
        assert latest_skipped is not None  # counted: the latest of them is known
        lines.append(f"schedule {doc['name']}: skipped {skipped} fire time(s) up to {d.iso(latest_skipped)} (no agent "
                     f"ran within {grace:g} s of them)")
    if fire is not None:
        job_id = fire_job_id(doc, fire)
        queued = d.queued_doc(job_id, doc["spec"], now=now, submitter=submitter, nonce=new_nonce(),
                              schedule={"name": doc["name"], "fire_time": d.iso(fire)})
        try:  # a damaged schedule must not put a job in the queue that no agent can read
            d.decode(keys.queued(job_id), d.encode(queued), job_id)
        except CorruptDocument as e:
            raise CorruptDocument(keys.schedule(doc["name"]), f"its spec does not make a job: {e.reason}") from None
        made = create(store, keys.queued(job_id), queued)
        if made is not None:
            index(store, queued)
            # Its name entry: `stado status NAME` finds the newest fire (the winner alone writes it; a crash
            # before it leaves the latest fire found through the schedule's last_fired all the same).
            store.put(keys.name_entry(doc["name"], job_id), job_id.encode())
            lines.append(f"schedule {doc['name']}: fired {d.iso(fire)} as job {job_id}")
    new = dict(doc, last_fired=fire if fire is not None else latest_skipped,
               fired=doc.get("fired", 0) + (fire is not None), skipped=doc.get("skipped", 0) + skipped,
               generation=doc.get("generation", 0) + 1, nonce=new_nonce())
    written = replace_json(store, keys.schedule(doc["name"]), new, version)  # None: another agent moved it on first
    return "; ".join(lines) or None, None if written is None else (written, new)


class ScheduleKnowledge:
    """An agent's view of the schedules: listed every REFRESH_SECONDS (documents read only when their
    version changed), fired when due. Between refreshes it costs nothing; a schedule added meanwhile is
    learnt at the next refresh."""

    def __init__(self, store: ObjectStore, *, submitter: str, grace: float = DEFAULT_GRACE,
                 refresh: float = REFRESH_SECONDS):
        self.store, self.submitter, self.grace, self.refresh = store, submitter, grace, refresh
        self._docs: dict[str, tuple[object, dict]] = {}
        self._listed_at = -1e18

    def due_at(self, now: float) -> float:
        """The next time this agent has something to do: a refresh or a fire time."""
        soonest = self._listed_at + self.refresh
        for _, doc in self._docs.values():
            if not doc.get("paused"):
                try:
                    soonest = min(soonest, next_fire(doc, float(doc.get("last_fired") or now)))
                except (StadoError, KeyError, TypeError, ValueError):
                    continue
        return soonest

    def tick(self, now: float) -> list[str]:
        lines = []
        if now - self._listed_at >= self.refresh:
            listed = {e.key: e.version for e in self.store.list(keys.SCHEDULES)}
            self._docs = {k: v for k, v in self._docs.items() if listed.get(k) == v[0]}
            for key in listed.keys() - self._docs.keys():
                self._read(key)
            self._listed_at = now  # only once every schedule listed is known: a failed read lists again next time
        for key in list(self._docs):
            for _ in range(FIRES_PER_TICK):  # each fire time in turn, while any is due
                if key not in self._docs:
                    break
                version, doc = self._docs[key]
                try:
                    last = float(doc.get("last_fired") or 0)
                    if due_fire(doc, now, self.grace) is None and not (now - self.grace > last
                                                                       and next_fire(doc, last) <= now - self.grace):
                        break  # nothing due: no request
                    line, written = fire_one(self.store, doc, version, now=now, grace=self.grace,
                                             submitter=self.submitter)
                except (StadoError, KeyError, TypeError, ValueError, AttributeError) as e:
                    lines.append(f"{key}: cannot fire it ({e}); skipped until it changes")
                    self._docs[key] = (version, dict(doc, paused=True))
                    break
                if written is not None:
                    self._docs[key] = written  # its last_fired moved on by our own write: the version it returned
                else:
                    self._read(key)  # moved on by another agent's write (or nothing written): read what stands
                if line:
                    lines.append(line)
        return lines

    def _read(self, key: str) -> None:
        try:
            found = read_json(self.store, key)
        except CorruptDocument:
            found = None
        if found is None:
            self._docs.pop(key, None)
        else:
            self._docs[key] = (found[1], found[0])
