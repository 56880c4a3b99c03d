"""`stado submit --upload PATH`: a local file sent as an input of the job being submitted.

Each file is checked before anything is written (a regular file this user can read, whose base name is a
safe input name that no other input of the job has), then streamed to status/<id>/uploads/<name> (never
held whole in memory) while its SHA-256 is computed; the spec's input records the job it was stored under,
its size, SHA-256 and mode, so the agent verifies it as it verifies any input and `stado job rerun` reuses
it. The uploads are written before the queue entry: no agent ever sees a job whose upload is missing.
"""
import os
import stat

from ..core import keys
from ..core.errors import BadInput, UnsafeArtifactName
from ..objectstore.base import ObjectStore
from ..core.spec import InputRef, check_artifact_name


def check(path: str) -> str:
    """The name the file will have in the job's work directory; BadInput if it cannot be uploaded."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise BadInput(f"--upload {path}: no such file; nothing was submitted") from None
    except OSError as e:
        raise BadInput(f"--upload {path}: cannot read it ({e.strerror}); nothing was submitted") from None
    if not stat.S_ISREG(st.st_mode):
        raise BadInput(f"--upload {path}: not a regular file (a directory, device or pipe); give a file; nothing "
                       "was submitted")
    try:
        with open(path, "rb"):
            pass
    except OSError as e:
        raise BadInput(f"--upload {path}: cannot read it ({e.strerror}); nothing was submitted") from None
    try:
        return check_artifact_name(os.path.basename(os.path.abspath(path)))
    except UnsafeArtifactName as e:
        raise BadInput(f"--upload {path}: {e}; rename the file; nothing was submitted") from None


def check_names(paths: tuple[str, ...], taken: set[str]) -> list[tuple[str, str]]:
    """[(path, name)] for one job's uploads; BadInput when a name is already an input of the job."""
    out = []
    for path in paths:
        name = check(path)
        if name in taken:
            raise BadInput(f"--upload {path}: the job already has an input named {name!r} (each lands in the work "
                           "directory under its name); rename one; nothing was submitted")
        taken.add(name)
        out.append((path, name))
    return out


def send(store: ObjectStore, job_id: str, path: str, name: str) -> InputRef:
    from ..store.transfer import upload_file

    size, sha256, mode = upload_file(store, keys.upload(job_id, name), path)
    return InputRef(job_id, name, upload=True, size=size, sha256=sha256, mode=mode)
