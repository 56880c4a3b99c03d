"""The commands a job runs inside itself: checkpoint put and artifact put (staged here, uploaded by its agent)."""
import os

from .common import out


def cmd_checkpoint_put(args) -> int:
    from ..queue.checkpoints import stage

    for entry in stage(args.paths, dict(os.environ), name=args.name):
        out(f"staged checkpoint {entry['name']} ({entry['size']} bytes); uploaded while the job runs")
    return 0


def cmd_artifact_put(args) -> int:
    from ..queue.artifacts import stage

    for entry in stage(args.paths, dict(os.environ), name=args.name):
        out(f"staged {entry['name']} ({entry['size']} bytes, sha256 {entry['sha256']}); uploaded when the job ends")
    return 0
