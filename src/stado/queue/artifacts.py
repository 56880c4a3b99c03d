"""Artifacts: what a job produces (staged from inside the job, uploaded by its agent with a manifest
of names, sizes and SHA-256) and what a job consumes (inputs downloaded and verified before it starts).

Inside a job, `$STADO_BIN artifact put PATH...` only stages: it copies the files next to the job's
inputs file (WC_ARTIFACT_INPUTS_FILE names the job's own area), so the job's environment needs no
store credentials. The agent uploads the staged files when the job's process has ended.
"""
import hashlib
import json
import os
import stat

from ..core import keys
from ..store import transfer
from ..core.documents import encode, iso
from ..core.errors import (ArtifactError, BadInput, ChecksumMismatch, NotFinished, StadoError, TransferStalled, UnsafeArtifactName)
from ..objectstore.base import NotFound, ObjectStore
from ..core.spec import check_artifact_name
from ..store.transfer import Progress, Worker

STAGING = "artifacts"
WORK = "work"  # the job's working directory, beside its staging area
STAGING_TMP = "artifacts.tmp"  # copies in progress: a directory of their own, so any artifact name stays free
JOB_ID_FILE = "job-id"


def sha256_file(path: str) -> tuple[int, str]:
    h, size = hashlib.sha256(), 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
            size += len(chunk)
    return size, h.hexdigest()


# -- inside a job --------------------------------------------------------------------------------------

def job_area(env: dict[str, str]) -> str:
    job_id, inputs_file = env.get("WC_JOB_ID"), env.get("WC_ARTIFACT_INPUTS_FILE")
    if not job_id or not inputs_file:
        raise BadInput("artifact put runs inside a stado job (WC_JOB_ID and WC_ARTIFACT_INPUTS_FILE are not set)")
    area = os.path.dirname(os.path.abspath(inputs_file))
    try:
        with open(os.path.join(area, JOB_ID_FILE)) as f:
            owner = f.read().strip()
    except OSError:
        owner = None
    if owner != job_id:
        raise BadInput(f"{area} is not the area of job {job_id}: WC_ARTIFACT_INPUTS_FILE was changed")
    return area


def stage(paths: list[str], env: dict[str, str], name: str | None = None, *, what: str = "artifact",
          into: str = STAGING, tmp_dir: str = STAGING_TMP) -> list[dict]:
    """Copy each file into the job's staging directory `into` under its base name (or `name`, for one file);
    `what` names the command in messages (artifact, checkpoint)."""
    if not paths:
        raise BadInput(f"{what} put needs at least one file: $STADO_BIN {what} put PATH...")
    if name is not None and len(paths) != 1:
        raise BadInput("--name renames one file: give exactly one PATH with it")
    area = job_area(env)
    staging, staging_tmp = os.path.join(area, into), os.path.join(area, tmp_dir)
    os.makedirs(staging, exist_ok=True)
    os.makedirs(staging_tmp, exist_ok=True)
    staged: list[dict] = []
    work = os.path.realpath(os.path.join(area, WORK))
    for path in paths:
        if not os.path.isfile(path):
            raise BadInput(f"{path}: not a regular file; {what} put uploads files")
        real = os.path.realpath(path)
        if real != os.path.normpath(os.path.abspath(path)) and os.path.commonpath([real, work]) != work:
            raise BadInput(f"{path}: a symbolic link to {real}, outside the job's work directory; refused "
                           f"(copy the file into the work directory to upload it as a {what})")
        artifact = check_artifact_name(name or os.path.basename(os.path.abspath(path)))
        tmp = os.path.join(staging_tmp, f"{os.getpid()}.{len(staged)}")  # renamed into staging/ once complete
        h, size = hashlib.sha256(), 0
        with open(real, "rb") as src, open(tmp, "wb") as dst:
            mode = os.fstat(src.fileno()).st_mode & 0o777
            while chunk := src.read(1 << 20):
                h.update(chunk)
                size += len(chunk)
                dst.write(chunk)
        os.chmod(tmp, mode)  # the staged copy carries the file's mode to the agent's upload
        os.replace(tmp, os.path.join(staging, artifact))
        staged.append({"name": artifact, "size": size, "sha256": h.hexdigest(), "mode": mode})
    return staged


# -- the agent, after the job's process ended ---------------------------------------------------------

def upload_staged(store: ObjectStore, job_id: str, area: str, *, now: float,
                  first_attempt: bool = False) -> dict:
    """Upload every staged regular file whose name `results` accepts (any such name, dot-files included:
    copies in progress live elsewhere), then the manifest (written last: a manifest names only uploaded
    bytes). A staged entry that is not a regular file, or whose name `results` would refuse (a job may
    write into its staging area by hand), is not uploaded: the manifest lists it under `refused`.

    The job's first attempt that staged nothing writes no manifest (one request fewer per job): no earlier
    attempt wrote one that an empty one would have to replace, and readers take a job whose terminal record
    says its process ran (an exit code or a signal) and that has no manifest as one with no artifacts
    (`results`; an input's producer with none has no artifact of any name)."""
    staging = os.path.join(area, STAGING)
    entries, refused = [], []
    for artifact in sorted(os.listdir(staging)) if os.path.isdir(staging) else []:
        why = _not_uploadable(staging, artifact)
        if why:
            refused.append({"name": artifact, "reason": why})
            continue
        path = os.path.join(staging, artifact)
        size, sha256, mode = transfer.upload_file(store, keys.artifact(job_id, artifact), path)
        entries.append({"name": artifact, "size": size, "sha256": sha256, "mode": mode})
    manifest = {"job": job_id, "written_at": iso(now), "artifacts": entries,
                "generation": 1, "nonce": os.urandom(12).hex()}
    if refused:
        manifest["refused"] = refused
    if entries or refused or not first_attempt:
        store.put(keys.manifest(job_id), encode(manifest))
    return manifest


def _not_uploadable(staging: str, name: str) -> str | None:
    try:
        check_artifact_name(name)
    except UnsafeArtifactName as e:
        return str(e)
    if not stat.S_ISREG(os.lstat(os.path.join(staging, name)).st_mode):
        return f"{name!r} is not a regular file (a link or a directory); only files are uploaded"
    return None


def read_manifest(store: ObjectStore, job_id: str) -> dict | None:
    try:
        data = store.get(keys.manifest(job_id)).data
    except NotFound:
        return None
    try:
        manifest = json.loads(data)
    except ValueError:
        raise ArtifactError(f"{keys.manifest(job_id)}: the result manifest is not JSON") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("artifacts"), list):
        raise ArtifactError(f"{keys.manifest(job_id)}: the result manifest has no artifact list")
    for entry in manifest["artifacts"]:
        if not isinstance(entry, dict) or not isinstance(entry.get("size"), int) or not isinstance(
                entry.get("sha256"), str) or not valid_mode(entry.get("mode")):
            from ..core.brief import brief

            raise ArtifactError(brief(f"{keys.manifest(job_id)}: malformed manifest entry {entry!r}", 200))
    return manifest


def valid_mode(mode) -> bool:
    """A recorded mode: permission bits (0..0o777), or absent (written before modes were kept)."""
    return mode is None or (isinstance(mode, int) and not isinstance(mode, bool) and 0 <= mode <= 0o777)


def _inside(directory: str, name: str) -> str:
    """The path of `name` in `directory`, refusing any name that would land elsewhere."""
    check_artifact_name(name)
    root = os.path.realpath(directory)
    target = os.path.realpath(os.path.join(root, name))
    if os.path.dirname(target) != root:
        raise UnsafeArtifactName(f"artifact name {name!r} escapes {directory}; refused")
    return os.path.join(root, name)


def download(store: ObjectStore, job_id: str, entries: list[dict], directory: str, *, progress: Progress,
             stall_seconds: float | None, partial_dir: str | None = None, key_of=None) -> list[dict]:
    """Download and verify each entry into `directory`, in ranges that resume (transfer.download). Every
    name is checked before anything is written; a file whose size or SHA-256 differs from the manifest is
    not kept, and ChecksumMismatch names it after the others are in place. Bytes fetched before a stall
    stay in a hidden partial file (in `partial_dir`, default `directory`) that the next attempt resumes.
    key_of(name) is the object's key (default: job_id's artifact of that name); a file gets the entry's
    `mode` (an entry without one, written before modes were kept, gets 0644)."""
    key_of = key_of or (lambda name: keys.artifact(job_id, name))
    try:
        os.makedirs(directory, exist_ok=True)
        if not os.path.isdir(directory) or not os.access(directory, os.W_OK | os.X_OK):
            raise NotADirectoryError(20, "not a writable directory")
    except OSError as e:
        raise BadInput(f"cannot write results into {directory} ({e.strerror or e}): give a directory that can be "
                       "created and written") from None
    targets = [(entry, _inside(directory, entry.get("name") or "")) for entry in entries]
    for _, target in targets:
        if os.path.islink(target) or os.path.isdir(target):
            raise UnsafeArtifactName(f"{target} exists and is a link or directory; refused")
    progress.total += sum(entry["size"] for entry in entries)
    partial_dir = partial_dir or os.path.realpath(directory)
    os.makedirs(partial_dir, exist_ok=True)
    bad, done = [], []
    for entry, target in targets:
        partial = os.path.join(partial_dir, ".stado-partial-" + hashlib.sha256(entry["name"].encode()).hexdigest()[:16])
        try:
            transfer.download(store, key_of(entry["name"]), partial, size=entry["size"],
                              sha256=entry["sha256"], progress=progress, stall_seconds=stall_seconds)
        except NotFound:
            bad.append(f"{entry['name']} (missing from the store)")
            continue
        except ChecksumMismatch as e:
            bad.append(f"{entry['name']} ({e})")
            continue
        except TransferStalled as e:
            raise TransferStalled(f"{entry['name']}: {e}") from None
        mode = entry.get("mode")
        transfer.publish(partial, target, 0o644 if mode is None else mode)
        done.append(dict(entry, path=target))
    if bad:
        raise ChecksumMismatch(f"job {job_id}: verification failed for {', '.join(bad)}; those files were not kept")
    return done


def results(store: ObjectStore, job_id: str, directory: str, *, stall_timeout: float | None = None,
            on_progress=None) -> tuple[list[dict], list[dict]]:
    """(the artifacts downloaded and verified into `directory`, those the agent refused to upload).
    NotFinished when the job has not finished (no manifest yet); the download runs on a worker thread
    watched from here, so progress (a stall included) is reported, and Ctrl-C (KeyboardInterrupt) or a
    stall_timeout, if one is set, ends it with what arrived kept."""
    manifest = read_manifest(store, job_id)
    if manifest is None:
        from ..core.documents import status_json
        from .lookup import view

        data = status_json(view(store, job_id))
        if not data["terminal"]:
            raise NotFinished(f"job {job_id} has not finished ({data['state']}): it has no results yet; wait for "
                              f"it (`stado job watch {job_id}`) and ask again")
        if data.get("exit_code") is not None or data.get("signal"):
            return [], []  # its process ran and staged nothing: its agent wrote no manifest (upload_staged)
        raise StadoError(f"job {job_id} ended {data['state']} without a result manifest (it never reached an "
                            "agent's upload, or ran on one that wrote none); there is nothing to download")
    progress = Progress()
    worker = Worker(lambda p: download(store, job_id, manifest["artifacts"], directory, progress=p,
                                       stall_seconds=stall_timeout), progress, stall_seconds=stall_timeout,
                    name=f"results-{job_id}")
    try:
        got = transfer.watch(worker.start(), on_progress)
    except TransferStalled as e:
        raise TransferStalled(f"job {job_id}: downloading its artifacts stopped moving ({e}); what arrived is kept in "
                              f"{directory}, and `stado results` again resumes from there") from None
    return got, manifest.get("refused") or []


def fetch_inputs(store: ObjectStore, inputs: list[dict], work_dir: str, *, progress: Progress,
                 stall_seconds: float | None, partial_dir: str) -> list[dict]:
    """Download and verify a job's declared inputs into its work directory (before it starts); bytes
    fetched by an attempt that stalled stay in `partial_dir` for the next one."""
    wanted = []
    for ref in inputs:
        if ref.get("upload"):  # sent by `stado submit --upload`: its size and SHA-256 are in the spec
            wanted.append((ref, {"name": ref["name"], "size": ref["size"], "sha256": ref["sha256"],
                                 "mode": ref.get("mode")}))
            continue
        manifest = read_manifest(store, ref["job"])
        entry = next((e for e in (manifest or {}).get("artifacts", []) if e.get("name") == ref["name"]), None)
        if entry is None:
            raise ArtifactError(f"input {ref['job']}:{ref['name']}: the job produced no artifact of that name")
        wanted.append((ref, entry))
    delivered = []
    for ref, entry in wanted:
        key_of = (lambda name, job=ref["job"]: keys.upload(job, name)) if ref.get("upload") else None
        for got in download(store, ref["job"], [entry], work_dir, progress=progress, stall_seconds=stall_seconds,
                            partial_dir=partial_dir, key_of=key_of):
            delivered.append({"job": ref["job"], "name": ref["name"], "path": got["path"], "size": got["size"],
                              "sha256": got["sha256"]})
    return delivered
