"""The supervisor's log: its stderr, which is the job's supervisor.log once it has detached (jobman.supervisor)."""
import os
import time


def log(message: str) -> None:
    """A line in the job's supervisor log."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime())
    try:
        os.write(2, f"{stamp} {message}\n".encode(errors="replace"))
    except OSError:
        pass
