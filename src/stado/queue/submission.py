"""Submitting jobs (`stado submit`, `--batch`, `stado job rerun`): validate everything, then write.

A job's id is chosen before its first write, and every try of a write sends the same bytes, so a retried
create-if-absent can never make a second job: the nonce tells our own landed write from another writer's. A write
whose answer is lost is not the end of a submit: it is tried again, with backoff, for a bounded time, and then the
job is looked for under every prefix of its life (queue/, running/, the terminal ones: a job claimed at once has
left queue/ already). What the store holds is what the submit reports: queued (exit 0), not queued (exit 4: only
when no write of ours can be there, or land later), or unknown (exit 7, with the id, when it cannot tell).

`--key KEY` makes a submit idempotent (submitkeys.py): submit-keys/<key>.json (create-if-absent) names the job the key submitted,
with that job's first record and a hash of the request, and is written before the job: running the same command
again returns that job, finishing its submission first if a run stopped between the two writes.
"""
import os

from runkit.core.clock import Clock
from runkit.core.ids import is_uuid, uuid7
from runkit.core.records import record

from ..core import documents as d
from ..core import keys
from ..store.cas import new_nonce
from ..core.errors import BadInput, Conflict, JobNotFound, NotSubmitted, OutcomeUnknown, StadoError
from ..objectstore.base import AccessDenied, NotFound, ObjectStore, StoreError
from ..store.landing import EXISTING, LANDED, NOT_LANDED, TAKEN, UNKNOWN, Patience, create, retried
from .readyindex import index
from .submitkeys import check_key, claim_key, keyed_job, request_hash
from ..core.spec import InputRef, JobSpec, validate, with_inputs

# How long a submit goes on trying a write whose answer was lost (from its first failure), before it says what
# the store shows; obstore's own retries of each request come on top.
SETTLE_SECONDS = 10.0
_LIFECYCLE = ("queued", "running") + keys.TERMINAL_STATES


def whoami() -> str:
    """user@host of the process writing: recorded as who submitted, cancelled or paused."""
    user = os.environ.get("USER") or os.environ.get("LOGNAME")
    if not user:
        try:
            import pwd

            user = pwd.getpwuid(os.getuid()).pw_name
        except (ImportError, KeyError):
            user = str(os.getuid())
    who = f"{user}@{os.uname().nodename}"
    # Recorded as text in documents: bytes of the environment that are not UTF-8 are replaced, never stored as
    # lone surrogates that other readers cannot take.
    return who.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


class Submission(record("Submission", "spec inputs uploads key after", defaults=((), (), None, ()))):
    """A validated JobSpec whose inputs, (job selector, artifact name) pairs, may still name jobs by
    selector (resolved before anything is written; an InputRef is taken as it is), the local files
    to send as inputs (`--upload`), its idempotency key (`--key`), if any, and its dependencies still named by
    selector, (condition, job selector) pairs (`--after-success` and the others: resolved to ids with the inputs,
    and added to the spec's own). (runkit.core.records: typing costs a submission ~7 ms.)"""

    __slots__ = ()


class Queued(record("Queued", "docs unknown unindexed existing stopped")):
    """What a submit did: `docs`, the first record of every job queued (or, by its key, found queued before), in
    order; `unknown`, the first record of a job whose queueing could not be told (the batch stopped there), or
    None; `unindexed`, job id -> why its claim-order index entry could not be written (agents index it on their
    slow pass); `existing`, the ids a key found already submitted; `stopped`, the error that stopped the batch
    (what the rest of it did not get), or None."""

    __slots__ = ()


def _producer(store: ObjectStore, selector: str, name: str) -> str:
    from .lookup import find, has_records  # (a job with inputs only: lookup costs a plain submit ~1.5 ms)

    try:
        producer = find(store, selector)
    except JobNotFound:
        producer = None
    if producer is None or not has_records(store, producer):
        raise JobNotFound(f"--input {selector}:{name}: no job has the id or name {selector!r}; nothing was "
                          "submitted (see `stado status` for ids and names)")
    _check_produced(store, selector, producer, name)
    return producer


def _depended_on(store: ObjectStore, condition: str, selector: str) -> str:
    from .lookup import find, has_records
    from ..core.dependencies import FLAGS

    try:
        job = find(store, selector)
    except JobNotFound:
        job = None
    if job is None or not has_records(store, job):
        raise JobNotFound(f"{FLAGS[condition]} {selector}: no job has the id or name {selector!r}; nothing was "
                          "submitted (see `stado status` for ids and names)")
    return job


def _check_produced(store: ObjectStore, selector: str, producer: str, name: str) -> None:
    """BadInput when the producer has completed without an artifact `name`: its record is final, so the input
    could never be delivered. (A producer still queued or running may yet stage it; one that failed or was
    cancelled fails the consumer with input_unavailable, as documented.)"""
    from .artifacts import read_manifest
    from ..core.errors import ArtifactError, BadInput
    from ..objectstore.base import NotFound

    try:
        store.get(keys.terminal("completed", producer))
    except NotFound:
        return
    try:
        manifest = read_manifest(store, producer)
    except ArtifactError:
        return  # a damaged manifest: the agent's fetch says so, with the job
    if manifest is None:
        return  # no manifest yet: the completed record is being settled (the manifest is written before it)
    names = [entry.get("name") for entry in manifest["artifacts"]]
    if name not in names:
        from runkit.core.printable import printable

        has = ", ".join(printable(str(n)) for n in names[:10]) + (", ..." if len(names) > 10 else "")
        raise BadInput(f"--input {printable(selector)}:{printable(name)}: job {producer} completed without an "
                       f"artifact named {printable(name)!r} ({'it has: ' + has if names else 'it produced none'}); "
                       "nothing was submitted")


def submit(store: ObjectStore, items: list[Submission], *, submitter: str | None = None,
           rerun_of: str | None = None, rerun_inputs: str | None = None, clock: Clock,
           settle_seconds: float = SETTLE_SECONDS) -> list[d.Job]:
    """queue_jobs(), for a caller that wants the jobs or the error that stopped them."""
    done = queue_jobs(store, items, submitter=submitter, rerun_of=rerun_of, rerun_inputs=rerun_inputs, clock=clock,
                      settle_seconds=settle_seconds)
    if done.stopped is not None:
        raise done.stopped
    return done.docs


def queue_jobs(store: ObjectStore, items: list[Submission], *, submitter: str | None = None,
               rerun_of: str | None = None, rerun_inputs: str | None = None, clock: Clock,
               settle_seconds: float = SETTLE_SECONDS) -> Queued:
    """Queue jobs, all or nothing as far as validation goes: every spec, every input and every key is checked
    (inputs resolved to ids, uploads checked, keys read) before the first write. Inputs may name a job earlier in
    the same batch. An input given by a name records it (`given`), for `stado job rerun --fresh-inputs`. Uploads
    are written first (each file once, under the first job that sends it), then the jobs, in order; a job whose
    write did not land, or whose landing could not be told, stops the batch there (Queued.stopped says so)."""
    submitter = submitter or whoami()
    try:
        plans = _plans(store, items, rerun_of, rerun_inputs)
        if any(plan.sends for plan in plans):
            plans = _send_uploads(store, plans)
    except StoreError as e:
        raise NotSubmitted(f"{_said(e)}; nothing was submitted") from e
    docs: list[d.Job] = []
    unindexed: dict[str, str] = {}
    existing: list[str] = []
    for n, plan in enumerate(plans):
        first = plan.found
        if first is None:
            t = clock.wall()
            first = d.queued_doc(plan.job_id, plan.spec.to_json(), now=t, submitter=submitter, nonce=new_nonce(),
                                 rerun_of=rerun_of, rerun_inputs=rerun_inputs)
        try:
            outcome, said, first = _write(store, plan, first, settle_seconds)
        except StadoError as e:  # its key was taken meanwhile, by another request (or its record is damaged)
            return Queued(docs, None, unindexed, existing, e)
        if outcome == EXISTING:
            docs.append(first)
            existing.append(first.id)
            continue
        if outcome != LANDED:
            return Queued(docs, first if outcome == UNKNOWN else None, unindexed, existing,
                          _stop(outcome, said, first, plan, n, len(plans)))
        docs.append(first)
        # After the ledger entry: a crash in between is healed by the agents' slow pass (readyindex.reconcile).
        failed = retried(Patience(min(settle_seconds, 2.0)), index, store, first)
        if failed is not None:
            unindexed[first.id] = _said(failed)
    return Queued(docs, None, unindexed, existing, None)


def _write(store: ObjectStore, plan: "_Plan", first: d.Job, settle_seconds: float):
    """One job's writes up to its ledger entry: its key's record, its name entry, queue/<id>. (LANDED, None, its
    first record); (EXISTING, None, the first record of the job its key submitted before, found in the store); or
    (what stopped it, the error, the first record it was writing)."""
    patience = Patience(settle_seconds)
    if plan.key is not None and plan.found is None:
        outcome, said = claim_key(store, plan.key, plan.request, first, patience)
        if isinstance(outcome, d.Job):  # another run took the key meanwhile, for the same request
            first = outcome
        elif outcome != LANDED:  # the job itself was not written: whatever became of the key, it is not queued
            return NOT_LANDED, said, first
    if first.id != plan.job_id:
        try:
            there = _records_of(store, first)
        except StoreError:
            there = None  # the create below tells
        if there is True:
            return EXISTING, None, first
    if first.spec.name:
        # The name index is written first: a crash between the two writes leaves a name that points at
        # no job (lookups skip it), never a job its name cannot find.
        failed = retried(patience, store.put, keys.name_entry(first.spec.name, first.id), first.id.encode())
        if failed is not None:
            return NOT_LANDED, failed, first
    job = first
    outcome, said = create(store, keys.queued(job.id), d.encode(job), lambda: _records_of(store, job), patience,
                            exists_is_ours=True)
    return outcome, said, first


class _Plan(record("_Plan", "job_id spec sends key request found")):
    """One job to write: its id (chosen before any write), its spec with inputs resolved, the uploads to send, its
    key and the hash of its request (the request as given, for a key), and, when its key names a job already,
    that job's first record (`found`: written then, never chosen anew)."""

    __slots__ = ()


def _plans(store: ObjectStore, items: list[Submission], rerun_of: str | None, rerun_inputs: str | None) -> list:
    plans = []
    batch_names: dict[str, str] = {}
    batch_keys: set[str] = set()
    for item in items:
        job_id, spec, sends = _plan(store, item, batch_names)
        if spec.name:
            batch_names[spec.name] = job_id
        request = found = None
        if item.key is not None:
            check_key(item.key)
            if item.key in batch_keys:
                raise BadInput(f"--key {item.key} is given to two jobs of the batch: a key names one job; nothing was "
                               "submitted")
            batch_keys.add(item.key)
            request = request_hash(item, rerun_of, rerun_inputs)
            found = keyed_job(store, item.key, request)
        plans.append(_Plan(job_id, spec, [] if found is not None else sends, item.key, request, found))
    return plans


def _records_of(store: ObjectStore, first: d.Job):
    """True when a record of the job `first` began is in the store (under any prefix of its life: a job claimed at
    once has left queue/ already), the record of another submission that has its id, or False when it has none."""
    from ..core.errors import CorruptDocument

    for _ in range(2):  # a job sent back to the queue (a retry) between two reads is missed by one pass
        for state in _LIFECYCLE:
            where = keys.state_key(state, first.id)
            try:
                blob = store.get(where)
            except NotFound:
                continue
            try:
                doc = d.decode(where, blob.data, first.id)
            except CorruptDocument:
                return True  # a damaged record of this id is still the job's (`stado status` lists it)
            return True if d.same_submission(doc, first) else doc
    return False


def _said(error: StoreError) -> str:
    """A store error in the words the CLI uses for it."""
    from ..objectstore.base import StoreUnavailable

    return str(error) if isinstance(error, (StoreUnavailable, AccessDenied)) else f"object store error: {error}"


def _stop(outcome, error, first: d.Job, plan: _Plan, n: int, total: int) -> Exception:
    """The error that stops a submit at job number `n` (from 0) of `total`: what happened to it and to the rest."""
    rest = ""
    if total > 1:
        rest = (f" ({n} job(s) before it queued, their ids printed; the {total - n - 1} after it not submitted)" if n
                else f" (the {total - 1} job(s) after it not submitted)")
    if outcome == TAKEN:
        return Conflict(f"job id {first.id} already taken (clock or id generator fault); nothing more was submitted"
                        + rest)
    said = _said(error) if error is not None else "the store kept failing"
    if outcome == UNKNOWN:
        again = f"; `stado submit --key {plan.key} ...` again returns it" if plan.key is not None else ""
        return OutcomeUnknown(f"could not tell whether job {first.id} was queued: {said}; `stado status {first.id}` "
                              f"tells once the store answers{again}{rest}", first.id)
    what = "nothing was submitted" if not n else f"job {first.id} was not queued"
    if plan.key is not None:
        what += f" (its key {plan.key} may be recorded: the same command again submits the job, once)"
    return NotSubmitted(f"{said}; {what}{rest}")


def _plan(store: ObjectStore, item: Submission, batch_names: dict[str, str]) -> tuple[str, JobSpec, list]:
    """(a new job id, the spec with its inputs resolved to ids, [(path, name)] of the uploads to send): checked,
    nothing written."""
    job_id = uuid7()
    refs = []
    for entry in item.inputs:
        if isinstance(entry, InputRef):
            refs.append(entry)
            continue
        selector, name = entry
        producer = batch_names.get(selector) or _producer(store, selector, name)
        refs.append(InputRef(producer, name, given=None if is_uuid(selector) else selector))
    spec = with_inputs(item.spec, tuple(refs))
    if item.after:
        resolved: dict[str, list[str]] = {}
        for condition, selector in item.after:
            job = batch_names.get(selector) or _depended_on(store, condition, selector)
            resolved.setdefault(condition, list(getattr(spec, condition)))
            if job not in resolved[condition]:
                resolved[condition].append(job)
        spec = spec._replace(**{condition: tuple(ids) for condition, ids in resolved.items()})
    spec = validate(spec)
    sends = []
    if item.uploads:
        from .uploads import check_names

        sends = check_names(item.uploads, {ref.name for ref in refs})
    return job_id, spec, sends


def stored_spec(store: ObjectStore, item: Submission) -> JobSpec:
    """The spec a schedule keeps for every job it fires: its inputs resolved to ids now, as `stado submit` resolves
    them, and its uploads stored now, once (under an id of their own that no job takes), so every fired job reads
    the same bytes."""
    plans = [_Plan(*_plan(store, item, {}), None, None, None)]
    if plans[0].sends:
        plans = _send_uploads(store, plans)
    return plans[0].spec


def _send_uploads(store: ObjectStore, plans: list) -> list:
    """Write every upload (a file sent by several jobs of a batch goes up once) and add it to the specs."""
    from .uploads import send

    sent: dict[str, InputRef] = {}
    out = []
    for plan in plans:
        refs = []
        for path, name in plan.sends:
            real = os.path.realpath(path)
            if real not in sent:
                sent[real] = send(store, plan.job_id, path, name)
            refs.append(sent[real]._replace(name=name))
        out.append(plan._replace(spec=validate(with_inputs(plan.spec, plan.spec.inputs + tuple(refs)))))
    return out


def rerun(store: ObjectStore, selector: str, *, submitter: str | None = None, fresh_inputs: bool = False,
          beside: bool = False, key: str | None = None, clock: Clock) -> tuple[d.Job, d.Job]:
    """Resubmit a job's exact spec under a new id (`stado job rerun`): its inputs are the very producers the original
    read. With fresh_inputs, an input given by a name is resolved by that name again (the newest job that has
    it: a fixed and re-run producer is used); one given by id, and an upload, stay as they were. The new
    record says which (`rerun_inputs`). A job that has not finished is refused (BadInput) unless `beside`: the
    rerun would run beside it. `key`: as `stado submit --key` (the same rerun again returns the same job).
    Returns (original view doc, new queued doc)."""
    from .lookup import find, view
    from ..core.spec import spec_from_json

    job_id = find(store, selector)
    seen = view(store, job_id)
    if not seen.terminal and not beside:
        raise BadInput(f"job {job_id} is still {seen.state}: a rerun would run it a second time beside it; wait for it "
                       f"to end (`stado job watch {selector}`), or pass --beside to run both")
    original = seen.doc
    spec = spec_from_json(original.spec.raw)
    inputs = tuple((ref.given or ref.job, ref.name) if fresh_inputs and not ref.upload else ref for ref in spec.inputs)
    new = submit(store, [Submission(with_inputs(spec, ()), inputs, (), key)], submitter=submitter, rerun_of=job_id,
                 rerun_inputs="fresh" if fresh_inputs else "original", clock=clock)[0]
    return original, new
