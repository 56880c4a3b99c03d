"""stado's reading commands: status, machine status, job watch, logs, wait and results."""
import sys

from ..core.errors import BadInput
from .common import PROG, open_store, out, print_json


def cmd_status(args) -> int:
    from ..commands import render

    store = open_store()
    if args.id:
        from ..core.documents import status_json
        from ..queue.lookup import find, view

        v = view(store, find(store, args.id))
        data = dict(status_json(v), spec=v.doc.spec.raw)
        if v.state == "queued":
            import time

            from ..commands.overview import why_queued

            data["waiting"] = why_queued(store, v.doc, time.time())
        print_json(data) if args.json else out(render.job_details(data))
        return 0
    from ..commands.overview import overview

    ov = overview(store, finished_limit=None if args.all else 20)
    print_json(render.overview_json(ov)) if args.json else out(render.overview_table(ov))
    return 0


def cmd_machine_status(args) -> int:
    from ..core.documents import status_json
    from ..queue.lookup import find, view

    store = open_store()
    print_json(status_json(view(store, find(store, args.id))))
    return 0


def cmd_watch(args) -> int:
    import json
    import time

    from runkit.core.printable import printable

    from ..core.documents import iso
    from ..commands.watch import End, State, Waiting, events

    out, err = sys.stdout, sys.stderr
    for event in events(open_store(), args.id, interval=max(args.interval, 0.05)):
        if isinstance(event, End):
            return event.exit_status
        if isinstance(event, Waiting):
            if args.json:
                out.write(json.dumps({"event": "waiting", "at": iso(time.time()), "reason": event.reason}) + "\n")
            else:
                err.write(f"{iso(time.time())} {event.job_id}: waiting: {event.reason or 'an agent has room for it'}\n")
                err.flush()
        elif isinstance(event, State) and args.json:
            out.write(json.dumps({"event": "state", "at": iso(time.time()), **event.data}, sort_keys=True) + "\n")
        elif isinstance(event, State):
            data = event.data
            where = f" on {data['instance_ref']}" if data.get("instance_ref") and data["state"] == "running" else ""
            result = f": {data['outcome']}" if data["terminal"] else ""
            code = f", exit {data['exit_code']}" if data["terminal"] and data.get("exit_code") is not None else ""
            err.write(printable(f"{iso(time.time())} {data['id']}: {event.label}{where}{result}{code}") + "\n")  # one line
            err.flush()
        elif args.json:
            out.write(json.dumps({"event": "output", "attempt": event.attempt, "seq": event.seq,
                                  "text": event.data.decode("utf-8", "replace")}) + "\n")
        else:
            if event.header:
                out.write(f"==> attempt {event.attempt} <==\n")
                out.flush()
            out.buffer.write(event.data) if hasattr(out, "buffer") else out.write(event.data.decode("utf-8", "replace"))
        out.flush()
    return 1


def cmd_logs(args) -> int:
    from ..commands.logs import follow, tail_of
    from ..queue.lookup import find

    store = open_store()
    job_id = find(store, args.id)
    out = sys.stdout.buffer
    text, last = tail_of(store, job_id, args.tail, args.attempt)
    out.write(text)
    out.flush()
    if not args.follow:
        return 0
    for item in follow(store, job_id, last, attempt=args.attempt, interval=max(args.interval, 0.05)):
        if isinstance(item, int):
            return item
        out.write(item)
        out.flush()
    return 1


def cmd_wait(args) -> int:
    from runkit.core.outcomes import EXIT_WAIT_TIMED_OUT

    from ..commands.watch import wait

    if args.interval <= 0:
        raise BadInput("--interval takes seconds above 0, e.g. --interval 0.5")
    result = wait(open_store(), args.ids, timeout=args.timeout, interval=args.interval)
    if args.json:
        print_json(result)
    if result["timed_out"]:
        pending = [job["id"] for job in result["jobs"] if not job["terminal"]]
        sys.stderr.write(f"{PROG}: wait timed out; still unfinished: {', '.join(pending)} (they go on)\n")
        return EXIT_WAIT_TIMED_OUT
    if not args.json and len(result["jobs"]) > 1:
        from ..commands.render import shown

        for job in result["jobs"]:
            if job["exit_status"] != 0:
                sys.stderr.write(f"{job['id']}: {shown(job['outcome'])} (exit {job['exit_status']})\n")
    return result["exit_status"]


def cmd_results(args) -> int:
    from runkit.core.printable import printable

    from ..queue import artifacts
    from ..queue.lookup import find
    from ..store.transfer import progress_printer

    store = open_store()
    job_id = find(store, args.id)
    shown = progress_printer(sys.stderr, f"{PROG}: results of {job_id}",
                             stalled_hint=f" (Ctrl-C stops it; `{PROG} results` again resumes from what arrived)"
                             ) if sys.stderr.isatty() else None
    got, refused = artifacts.results(store, job_id, args.dir, stall_timeout=store.stall_timeout, on_progress=shown)
    for entry in refused:
        sys.stderr.write(printable(f"{PROG}: {entry.get('name')!r} was not uploaded by the agent: {entry.get('reason')}")
                         + "\n")
    if args.json:
        print_json({"id": job_id, "artifacts": got, "refused": refused})
    else:
        for entry in got:
            out(f"{printable(entry['name'])}  {entry['size']} bytes  sha256 {entry['sha256']}  verified -> "
                 f"{printable(entry['path'])}")
        out(f"{len(got)} artifact(s) of {job_id} in {printable(args.dir)}")
    return 0
