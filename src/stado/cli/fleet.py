"""stado's fleet commands: reap, machine may-delete, repair, doctor and ui."""
import time
import sys

from ..core.errors import BadInput
from .common import open_store, out, print_json


def cmd_reap(args) -> int:
    from ..jobs.reaper import Watch, reap
    from ..queue.submission import whoami

    if not args.watch and (args.passes is not None or args.every is not None):
        raise BadInput("--every and --passes go with --watch (a one-shot pass takes neither)")
    every = 30.0 if args.every is None else args.every
    if every <= 0 or (args.passes is not None and args.passes < 1):
        raise BadInput("--every takes seconds above 0 and --passes a count of 1 or more")
    store, writer = open_store(), f"reaper {whoami()}"
    clock = _store_clock(store)
    if not args.watch:
        _print_reap(reap(store, writer=writer, margin=args.margin, clock=clock, now=clock.wall()), args.json)
        return 0
    import signal

    signal.signal(signal.SIGTERM, signal.default_int_handler)  # stop between passes as Ctrl-C does
    watch, done = Watch(), 0
    try:
        while True:
            if clock.due():
                clock = _store_clock(store)
            _print_reap(reap(store, writer=writer, margin=args.margin, watch=watch, clock=clock, now=clock.wall()), args.json)
            done += 1
            if args.passes is not None and done >= args.passes:
                return 0
            time.sleep(every)
    except KeyboardInterrupt:
        return 0


def cmd_may_delete(args) -> int:
    """The rule: a VM is not deleted while any job on it is alive by the reaper's verdict."""
    from ..jobs.reaper import alive_on

    ref = args.instance_ref
    if not ref.strip() or not ref.isprintable():
        raise BadInput(f"bad instance ref {ref!r}: give it as jobs record it, e.g. local@HOST (see `stado status`)")
    store = open_store()
    clock = _store_clock(store)
    alive = alive_on(store, ref, margin=args.margin, clock=clock, now=clock.wall())
    if args.json:
        print_json({"instance_ref": ref, "may_delete": not alive, "alive": [{"id": job_id, "by": why} for job_id, why in alive]})
    elif not alive:
        out(f"{ref} may be deleted: no job is alive on it")
    else:
        out(f"{ref} must not be deleted: {len(alive)} job(s) alive on it")
        for job_id, why in alive:
            out(f"  {job_id}  " + ("its running record is corrupt: cannot tell where it runs" if why == "corrupt"
                                    else f"alive by its {why}" if why != "unpromised" else "unpromised (kept)"))
    return 0 if not alive else 1


def _store_clock(store):
    """The store's clock, measured with a scratch object of this command's own (promises are judged by it, never
    by this host's clock)."""
    import os

    from ..store.storeclock import measured

    return measured(store, f"control/clock/{os.urandom(8).hex()}")


def _print_reap(summary, as_json: bool) -> None:
    lines = summary.lines + [problem.text for problem in summary.problems]
    if as_json:
        print_json(dict(summary.as_json(), lines=lines))
    else:
        for line in lines:
            out(line)
        out(summary.line())
    sys.stdout.flush()


def cmd_repair(args) -> int:
    from ..commands.repair import repair
    from ..queue.submission import whoami

    lines = repair(open_store(), args.id, by=whoami(), now=time.time())
    print_json({"actions": lines}) if args.json else out("\n".join(lines))
    return 0


def cmd_doctor(args) -> int:
    from ..commands.doctor import doctor

    report = doctor(open_store())
    if args.json:
        print_json(report)
    else:
        out(f"store {report['store']}")
        for check in report["checks"]:
            out(f"  {check['verdict']:<8} {check['check']:<19} {check['detail']}")
    return 0 if report["ok"] else 4


def cmd_ui(args) -> int:
    from runkit.web.server import LaunchError, run

    store = open_store()

    def make_app(launch):
        from ..ui.app import create

        return create(launch, store)

    try:
        return run("stado", args.host, args.port, make_app)
    except LaunchError as e:
        raise BadInput(str(e)) from None
