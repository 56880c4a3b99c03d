"""`stado job watch`: state changes and output, live, until the job is terminal; the exit status
mirrors the job's through the table both tools share (runkit.outcomes)."""
import json
import sys
import time

from runkit.outcomes import stado_exit_status

from .lookup import find, view
from .documents import iso, status_json
from .objectstore.base import ObjectStore
from .overview import output_since

def exit_status(data: dict) -> int:
    """The shared table (runkit.outcomes): the same codes as `jobman wait`."""
    return stado_exit_status(data.get("outcome"), data.get("exit_code"), data.get("signal"),
                             (data.get("error") or {}).get("class"))


def watch(store: ObjectStore, selector: str, *, interval: float = 1.0, as_json: bool = False) -> int:
    job_id = find(store, selector)
    out, err = sys.stdout, sys.stderr
    last, seq = None, 0
    while True:
        data = status_json(view(store, job_id))
        label = data["state"] + ("" if data["phase"] in (None, "running") else f"/{data['phase']}")
        if label != last:
            last = label
            if as_json:
                out.write(json.dumps({"event": "state", "at": iso(time.time()), **data}, sort_keys=True) + "\n")
            else:
                where = f" on {data['instance_ref']}" if data.get("instance_ref") and data["state"] == "running" else ""
                result = f": {data['outcome']}" if data["terminal"] else ""
                code = f", exit {data['exit_code']}" if data["terminal"] and data.get("exit_code") is not None else ""
                err.write(f"{iso(time.time())} {job_id}: {label}{where}{result}{code}\n")
            (err if not as_json else out).flush()
        for seq, chunk in output_since(store, job_id, seq):
            if as_json:
                out.write(json.dumps({"event": "output", "seq": seq, "text": chunk.decode("utf-8", "replace")}) + "\n")
            else:
                out.buffer.write(chunk) if hasattr(out, "buffer") else out.write(chunk.decode("utf-8", "replace"))
            out.flush()
        if data["terminal"]:
            return exit_status(data)
        time.sleep(interval)
