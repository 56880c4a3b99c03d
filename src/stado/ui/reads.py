"""What `stado ui` reads: the queue in claim order one page at a time, the running jobs with their promise and
pulse, recent terminal jobs, agents, schedules, the pause record, the cost of capped jobs, one job's page, and a
fingerprint that moves with any of it. Read the way `stado status` reads (overview's listings, then the records
that state each shown job's truth, resolved by documents.resolve), without writing anything.

A page costs one LIST per prefix and a GET per job shown: with 10,000 jobs queued, the queue's order comes from
the claim-order index's key names (`ready/<rank>-<id>`, no bodies read), and only the page's records are read.
"""
import time

from ..core import documents as d
from ..core import keys
from ..core.admission import cost_of, offer_of, unschedulable
from ..core.errors import ArtifactError, BadInput
from ..core.spec import shown_spec
from ..queue.lookup import find, view
from ..objectstore.base import NotFound, ObjectStore, StoreError
from ..commands.overview import Overview, agent_records, job_records, listed, output_since
from ..queue.pause import pause_record

PAGE_MAX = 500
RECENT = 50  # terminal jobs shown, newest first


def _resolved(store: ObjectStore, job_id: str, states: list[str], out: Overview):
    v = d.resolve(job_id, job_records(store, job_id, states, out))
    if v is not None:
        v.also = [s for s in states if s != v.state]
    return v


def _claim_order(store: ObjectStore, queued: list[str], out: Overview) -> list[str]:
    """The queued ids in the order agents claim them: priority, then creation, from the index's key names; a
    queue entry the index lacks (a crash between the two writes, healed by the agents' slow pass) is placed by its
    own priority, read from its record."""
    rank = {}
    for entry in store.list(keys.READY):
        job_id = keys.job_id_of_ready(entry.key)
        if job_id is not None:
            rank[job_id] = int(entry.key[len(keys.READY):].split("-", 1)[0])
    for job_id in queued:
        if job_id not in rank:
            v = _resolved(store, job_id, ["queued"], out)
            priority = v.doc.spec.priority if v is not None else 0
            rank[job_id] = keys.PRIORITY_HIGHEST - int(priority)
    return sorted(queued, key=lambda job_id: (rank[job_id], job_id))


def _matching(store: ObjectStore, search: str):
    """(lower-cased text, ids whose name contains it (names/ index)) for the search box; None: no search."""
    text = search.strip().lower()
    if not text:
        return None
    named = set()
    for entry in store.list(keys.NAMES):
        name, _, job_id = entry.key[len(keys.NAMES):].rpartition("/")
        if text in name.lower():
            named.add(job_id)
    return text, named


def _matches(job_id: str, wanted) -> bool:
    """Whether a job is in the search's result: its name contains the text, or its id does (a prefix as the CLI
    shows it, or the tail the dashboard shows; dashes aside)."""
    return wanted is None or job_id in wanted[1] or wanted[0].replace("-", "") in job_id.replace("-", "")


def _row(v, now: float, agents: dict) -> dict:
    """A job as the page lists it: `stado status --json`'s fields, and its spec's scheduling parts."""
    row = dict(d.status_json(v))
    spec = v.doc.spec.raw  # shown as stored
    row.update(priority=spec.get("priority", 0), capabilities=spec.get("capabilities") or [],
               cores=spec.get("cores"), memory=spec.get("memory"), accelerators=spec.get("accelerators"),
               cost_cap=spec.get("cost_cap"), schedule=(v.doc.schedule or {}).get("name"))
    return row


def board(store: ObjectStore, *, offset: int = 0, limit: int = 100, search: str = "", recent: int = RECENT,
          now: float) -> dict:
    """Everything the dashboard's main page shows, in one pass: {"paused", "counts", "queue": {"total",
    "offset", "limit", "jobs"}, "running", "recent", "agents", "stale_agents", "schedules", "costs", "problems"}.
    Queue rows carry their place in claim order and, when no live agent can run them, why; running rows their
    promise, whether it has passed and their last pulse."""
    if not (0 <= offset and 1 <= limit <= PAGE_MAX):
        raise BadInput(f"a page starts at 0 or later and holds 1 to {PAGE_MAX} jobs")
    out = Overview()
    present, by_state = listed(store, out)
    agent_records(store, out, now)
    agents = {a.get("agent"): a for a in out.agents}
    wanted = _matching(store, search)
    order = [j for j in _claim_order(store, by_state.get("queued", []), out) if _matches(j, wanted)]
    queue = []
    for place, job_id in enumerate(order[offset:offset + limit], start=offset):
        v = _resolved(store, job_id, present[job_id], out)
        if v is None:
            continue
        row = _row(v, now, agents)
        row["place"] = place
        row["unschedulable"] = unschedulable(v.doc.spec, out.agents, now) if v.state == "queued" else None
        queue.append(row)
    running = []
    for job_id in sorted(j for j in by_state.get("running", []) if _matches(j, wanted)):
        v = _resolved(store, job_id, present[job_id], out)
        if v is not None:
            running.append(_running_row(store, v, now, agents))
    finished = sorted((j for s in keys.TERMINAL_STATES for j in by_state.get(s, []) if _matches(j, wanted)),
                      reverse=True)
    recent_rows = [_row(v, now, agents) for job_id in finished[:recent]
                   if (v := _resolved(store, job_id, present[job_id], out)) is not None]
    from ..queue.schedules import list_schedules

    counts = {state: len(ids) for state, ids in by_state.items()}
    rows = queue + running + recent_rows
    return {"paused": pause_record(store), "counts": counts,
            "queue": {"total": len(order), "offset": offset, "limit": limit, "jobs": queue},
            "running": running, "recent": recent_rows, "agents": out.agents, "stale_agents": out.stale_agents,
            "schedules": list_schedules(store, now=now, problems=out.problems),
            "costs": [_cost(r, agents) for r in rows if r.get("cost_cap") is not None],
            "problems": out.problems, "now": d.iso(now)}


def _running_row(store: ObjectStore, v, now: float, agents: dict) -> dict:
    row = _row(v, now, agents)
    try:
        promise = d.parse_iso(v.doc.lease_expires_at)
    except (TypeError, ValueError):
        promise = None
    row["promise_passed_seconds"] = (round(now - promise, 1) if promise is not None and now > promise
                                     and d.process_may_run(v.doc) else None)
    try:
        row["pulse_at"] = d.iso(store.head(keys.heartbeat(v.id)).modified)
    except (NotFound, StoreError, TypeError, ValueError):
        row["pulse_at"] = None
    agent = agents.get(v.doc.owner)
    started = d.parse_iso(v.doc.started_at) if v.doc.started_at else None
    offer = offer_of(agent) if agent else None
    row["cost_so_far"] = (round(cost_of(v.doc.spec, offer, now - started), 6)
                          if offer is not None and started is not None and offer.price_per_hour is not None else None)
    row["agent_live"] = agent is not None
    return row


def _cost(row: dict, agents: dict) -> dict:
    agent = agents.get(row.get("owner")) or {}
    spent = row.get("cost_usd") if row.get("cost_usd") is not None else row.get("cost_so_far")
    return {"id": row["id"], "name": row["name"], "state": row["state"], "cost_cap": row["cost_cap"],
            "cost_usd": spent, "price_per_hour": agent.get("price_per_hour"), "instance_ref": row.get("instance_ref"),
            "share_of_cap": None if spent is None or not row["cost_cap"] else round(spent / row["cost_cap"], 4)}


def job(store: ObjectStore, selector: str) -> dict:
    """One job: what `stado status ID --json` prints (spec included), its attempts as its record keeps them, its
    pulse, and its artifacts with their sizes and SHA-256 as the result manifest lists them (or why not)."""
    job_id = find(store, selector)
    v = view(store, job_id)
    doc = v.doc
    data = dict(d.status_json(v), spec=shown_spec(doc.spec.raw))
    current = {"attempt": d.attempt_of(doc), "instance_ref": doc.instance_ref, "owner": doc.owner,
               "claimed_at": doc.claimed_at, "started_at": doc.started_at,
               "finished_at": doc.finished_at, "result": doc.result or (
                   {"outcome": doc.outcome, "exit_code": doc.exit_code, "signal": doc.signal, "error": doc.error,
                    "cost_usd": doc.cost_usd} if v.state in keys.TERMINAL_STATES else None)}
    data["attempts"] = {"current": current, "previous": doc.last_attempt, "previous_result": doc.last_result,
                        "requeue_reason": doc.requeue_reason, "reaped": doc.reaped, "cancel": doc.cancel}
    try:
        data["pulse_at"] = d.iso(store.head(keys.heartbeat(job_id)).modified)
    except (NotFound, StoreError, TypeError, ValueError):
        data["pulse_at"] = None
    try:
        from ..queue.artifacts import read_manifest

        data["manifest"], data["manifest_problem"] = read_manifest(store, job_id), None
    except ArtifactError as e:
        data["manifest"], data["manifest_problem"] = None, str(e)
    return data


def output(store: ObjectStore, job_id: str, after: tuple[int, int]) -> dict:
    """The job's stored output chunks after `after` ((attempt, chunk)), as it was stored (redacted by its agent):
    {"pieces": [(attempt, bytes)], "after", "done": the job is terminal, so nothing more will come}. The state
    is read first, so a chunk written before the job ended is never missed."""
    done = view(store, job_id).terminal
    chunks = output_since(store, job_id, after)
    return {"pieces": [(seq[0], data) for seq, data in chunks], "after": chunks[-1][0] if chunks else after,
            "done": done}


def fingerprint(store: ObjectStore) -> tuple:
    """The keys and versions of every queued and terminal job record and schedule, the keys of running jobs and
    agents, and the pause record: a move, a new job, an agent that comes or goes, a pause or a schedule change
    gives another one. A lease's renewal and an agent's pulse (a write every poll) do not: what they move (a
    promise, a last sight) ages on the page's slow timer instead of refetching the board at every poll. One LIST
    per prefix."""
    return (_dear(store)[0], *_cheap(store))


DEAR = (keys.QUEUE, keys.COMPLETED, keys.FAILED, keys.CANCELLED, keys.SCHEDULES)


def _dear(store: ObjectStore) -> tuple[str, str]:
    """(the digest of the big prefixes' keys and versions, the newest queue key or "")."""
    digest, newest = _digest(store, DEAR, True)
    return digest, newest.get(keys.QUEUE, "")


def _digest(store: ObjectStore, prefixes, versioned: bool) -> tuple[str, dict]:
    """(a digest of the prefixes' keys, and versions if `versioned`; the last key of each prefix listed)."""
    import hashlib

    digest, last = hashlib.sha256(), {}
    for prefix in prefixes:
        for entry in store.list(prefix):
            digest.update(f"{entry.key}\0{entry.version if versioned else ''}\n".encode())
            last[prefix] = entry.key
    return digest.hexdigest(), last


def _cheap(store: ObjectStore) -> tuple:
    """What moves often and costs little to list: running jobs and agents (keys), the pause record."""
    try:
        paused = store.head(keys.QUEUE_PAUSE).version
    except NotFound:
        paused = None
    return (_digest(store, (keys.RUNNING, keys.AGENTS), False)[0], str(paused))


class Watch:
    """The fingerprint an open page's change stream compares, in two tiers. At each look, the cheap one: running
    jobs and agents (small prefixes), the pause, and whether the queue has a key newer than the newest seen (ids
    are time-ordered, so a submission, a rerun or a schedule's fire sorts last: a scan of the names, no read of
    each entry). The dear one (fingerprint(): every queued and terminal record's version, 50 ms of CPU at 10,000
    jobs) runs when the page itself changed something (`poked`), and otherwise within `share` of a core: a hold or
    a cancel of a queued job made elsewhere shows within several seconds, a new job at the next look."""

    def __init__(self, share: float):
        self.share = share
        self.dear: str | None = None
        self.dear_at, self.dear_cost = 0.0, 0.0
        self.newest = ""  # the newest queue key the dear tier saw ("" for none)

    def __call__(self, store: ObjectStore, now: float, poked: bool = False) -> tuple:
        """now: a monotonic clock's reading (when the dear tier is due is measured by it)."""
        if self.dear is None or poked or now - self.dear_at >= self.dear_cost / self.share:
            began = time.thread_time()
            self.dear, self.newest = _dear(store)
            self.dear_at, self.dear_cost = now, time.thread_time() - began
        else:  # a new job moves the newest key: a change, without the full listings
            newer = store.list_page(keys.QUEUE, start_after=self.newest or None, limit=1000)
            if newer:
                self.newest = newer[-1].key
        return (self.dear, self.newest, *_cheap(store))


def whole_output(store: ObjectStore, selector: str) -> tuple[str, bytes]:
    """(the job's id, every output chunk it stored, in order): the output pane's download."""
    job_id = find(store, selector)
    return job_id, b"".join(data for _, data in output_since(store, job_id, (0, 0)))


def artifact(store: ObjectStore, selector: str, name: str) -> tuple[str, str, bytes]:
    """(the job's id, the name, the bytes) of an artifact its result manifest lists; JobNotFound for a name the
    manifest does not list (nothing else under the job's keys is served)."""
    from ..core.errors import JobNotFound
    from ..queue.artifacts import read_manifest

    job_id = find(store, selector)
    manifest = read_manifest(store, job_id) or {"artifacts": []}
    if not any(entry.get("name") == name for entry in manifest["artifacts"]):
        raise JobNotFound(f"job {job_id} has no artifact named {name!r}: its page lists those it has")
    try:
        return job_id, name, store.get(keys.artifact(job_id, name)).data
    except NotFound:
        raise JobNotFound(f"job {job_id}: artifact {name!r} is listed but missing from the store") from None
