"""Submitting jobs (`stado submit`, `--batch`, `stado job rerun`): validate everything, then write."""
import os
import time

from runkit.ids import is_uuid, uuid7
from runkit.records import record

from . import documents as d
from . import keys
from .cas import create, new_nonce
from .errors import Conflict, JobNotFound
from .objectstore.base import ObjectStore
from .readyindex import index
from .spec import InputRef, JobSpec, validate, with_inputs


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


class Submission(record("Submission", "spec inputs uploads", defaults=((), ()))):
    """A validated JobSpec whose inputs, (job selector, artifact name) pairs, may still name jobs by
    selector (resolved before anything is written; an InputRef is taken as it is), and the local files
    to send as inputs (`--upload`). (runkit.records: typing costs a submission ~7 ms.)"""

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


def _check_produced(store: ObjectStore, selector: str, producer: str, name: str) -> None:
    """BadInput when the producer has completed without an artifact `name`: its record is final, so the input
    could never be delivered. (A producer still queued or running may yet stage it; one that failed or was
    cancelled fails the consumer with input_unavailable, as documented.)"""
    from .artifacts import read_manifest
    from .errors import ArtifactError, BadInput
    from .objectstore.base import NotFound

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
        from runkit.printable import printable

        has = ", ".join(printable(str(n)) for n in names[:10]) + (", ..." if len(names) > 10 else "")
        raise BadInput(f"--input {printable(selector)}:{printable(name)}: job {producer} completed without an "
                       f"artifact named {printable(name)!r} ({'it has: ' + has if names else 'it produced none'}); "
                       "nothing was submitted")


def submit(store: ObjectStore, items: list[Submission], *, submitter: str | None = None,
           rerun_of: str | None = None, rerun_inputs: str | None = None, now: float | None = None) -> list[d.Job]:
    """Queue jobs, all or nothing as far as validation goes: every spec and every input is checked (inputs
    resolved to ids, uploads checked) before the first write. Inputs may name a job earlier in the same
    batch. An input given by a name records it (`given`), for `stado job rerun --fresh-inputs`. Uploads
    are written first (each file once, under the first job that sends it), then the jobs."""
    submitter = submitter or whoami()
    planned: list[tuple[str, JobSpec, list]] = []
    batch_names: dict[str, str] = {}
    for item in items:
        planned.append(_plan(store, item, batch_names))
        if planned[-1][1].name:
            batch_names[planned[-1][1].name] = planned[-1][0]
    if any(sends for _, _, sends in planned):
        planned = _send_uploads(store, planned)
    docs = []
    for job_id, spec, _ in planned:
        t = time.time() if now is None else now
        doc = d.queued_doc(job_id, spec.to_json(), now=t, submitter=submitter, nonce=new_nonce(), rerun_of=rerun_of,
                           rerun_inputs=rerun_inputs)
        if spec.name:
            # The name index is written first: a crash between the two writes leaves a name that points at
            # no job (lookups skip it), never a job its name cannot find.
            store.put(keys.name_entry(spec.name, job_id), job_id.encode())
        if create(store, keys.queued(job_id), doc) is None:
            raise Conflict(f"job id {job_id} already taken (clock or id generator fault); nothing more was submitted")
        index(store, doc)  # after the ledger entry: a crash in between is healed by the agents' slow pass
        docs.append(doc)
    return docs


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
    spec = validate(with_inputs(item.spec, tuple(refs)))
    sends = []
    if item.uploads:
        from .uploads import check_names

        sends = check_names(item.uploads, {ref.name for ref in refs})
    return job_id, spec, sends


def stored_spec(store: ObjectStore, item: Submission) -> JobSpec:
    """The spec a schedule keeps for every job it fires: its inputs resolved to ids now, as `stado submit` resolves
    them, and its uploads stored now, once (under an id of their own that no job takes), so every fired job reads
    the same bytes."""
    planned = [_plan(store, item, {})]
    if planned[0][2]:
        planned = _send_uploads(store, planned)
    return planned[0][1]


def _send_uploads(store: ObjectStore, planned: list) -> list:
    """Write every upload (a file sent by several jobs of a batch goes up once) and add it to the specs."""
    from .uploads import send

    sent: dict[str, InputRef] = {}
    out = []
    for job_id, spec, sends in planned:
        refs = []
        for path, name in sends:
            real = os.path.realpath(path)
            if real not in sent:
                sent[real] = send(store, job_id, path, name)
            refs.append(sent[real]._replace(name=name))
        out.append((job_id, validate(with_inputs(spec, spec.inputs + tuple(refs))), sends))
    return out


def rerun(store: ObjectStore, selector: str, *, submitter: str | None = None, fresh_inputs: bool = False,
          beside: bool = False) -> tuple[d.Job, d.Job]:
    """Resubmit a job's exact spec under a new id (seed 003): its inputs are the very producers the original
    read. With fresh_inputs, an input given by a name is resolved by that name again (the newest job that has
    it: a fixed and re-run producer is used); one given by id, and an upload, stay as they were. The new
    record says which (`rerun_inputs`). A job that has not finished is refused (BadInput) unless `beside`: the
    rerun would run beside it. Returns (original view doc, new queued doc)."""
    from .errors import BadInput
    from .lookup import find, view
    from .spec import spec_from_json

    job_id = find(store, selector)
    seen = view(store, job_id)
    if not seen.terminal and not beside:
        raise BadInput(f"job {job_id} is still {seen.state}: a rerun would run it a second time beside it; wait for it "
                       f"to end (`stado job watch {selector}`), or pass --beside to run both")
    original = seen.doc
    spec = spec_from_json(original.spec.raw)
    inputs = tuple((ref.given or ref.job, ref.name) if fresh_inputs and not ref.upload else ref for ref in spec.inputs)
    new = submit(store, [Submission(with_inputs(spec, ()), inputs)], submitter=submitter, rerun_of=job_id,
                 rerun_inputs="fresh" if fresh_inputs else "original")[0]
    return original, new
