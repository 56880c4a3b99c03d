"""stado command line: parse, call one library function per command, render.

Exit codes: 0 done; 1 a failure while doing it; 2 bad input (nothing written); 3 no such job;
4 the object store is unreachable, refused the credentials, is not an object store, does not honour conditional writes (`stado
doctor` says which), or a transfer stopped moving past a stall_timeout set in STADO_CONFIG (a submit or a cancel
exits 4 only when its write did not land: nothing was submitted, or written); 5 artifacts failed verification;
6 `results` of a job that has not finished; 7 a submit or a cancel could not tell whether its write landed (the
store's answer was lost and it could not be read back in time: `stado status ID` tells; a submit prints the id).
`stado job watch` exits with the job's own status (see docs/stado.md).
"""
import os
import sys

from runkit.cliargs import argparse_type, non_negative as _number, parser_class, whole as _whole
from runkit.fastargs import Option, add_to_argparse, fast_parse

from .errors import BadInput, StadoError

PROG = "stado"


# `stado submit` runs for every job: its options are a table that runkit.fastargs reads without
# argparse (~20 ms with what it imports); argparse, built from the same table, gives help and errors.
SUBMIT_OPTIONS = [
    Option("--batch", "batch", metavar="FILE", help="one command per line, or a JSON/TOML list of jobs; all or nothing"),
    Option("--name", "name", help="a display name; commands that take an id also take it"),
    Option("--cores", "cores", convert=_whole, default=1, help="cores reserved (CARGO_BUILD_JOBS); default 1"),
    Option("--memory", "memory", help="memory the job needs, e.g. 4G"),
    Option("--accelerators", "accelerators", convert=_whole, default=0, help="accelerators the job needs"),
    Option("--priority", "priority", convert=_whole, default=0,
           help="claim order, -1000 to 1000 (default 0): agents claim the highest first, then the oldest; it never "
                "stops a running job"),
    Option(("--capabilities", "--capability"), "capabilities", "append", metavar="CAP[,CAP]",
           help="capabilities an agent must declare (repeatable)"),
    Option("--provider", "provider", "append", metavar="NAME[,NAME]",
           help="providers allowed to run it (the provider fence; repeatable; default any)"),
    Option("--spot", "spot", default="allow", choices=("allow", "require", "never"), help="spot policy"),
    Option("--cost-cap", "cost_cap", convert=_number,
           help="cost cap in US dollars: stopped once its share of its agent's --price-per-hour passes it; not run "
                "on an agent that declares no price (unless --cost-cap-advisory)"),
    Option("--cost-cap-advisory", "cost_cap_advisory", "flag", default=False,
           help="an agent with no price may run it anyway (its cost is not judged there)"),
    Option("--timeout", "timeout", help="stop the job after this long, e.g. 30m"),
    Option("--retries", "retries", convert=_whole, default=0, help="more attempts after a failed one"),
    Option("--input", "input", "append", metavar="JOB:NAME",
           help="an artifact of another job, delivered into the work directory (repeatable)"),
    Option("--upload", "upload", "append", metavar="PATH",
           help="a local file, stored with the job and delivered into its work directory (repeatable)"),
    Option("--key", "key", metavar="KEY",
           help="an idempotency key: the same submit again with the same key returns the job it made (exit 0) "
                "instead of making another; the key with another command or flags is refused (exit 2)"),
    Option("--json", "json", "flag", default=False),
]


JSON_HELP = "print JSON instead of text (for scripts)"


def _json_flag(parser, help: str = JSON_HELP):
    """--json, which every reading command takes. Returns the parser."""
    parser.add_argument("--json", action="store_true", help=help)
    return parser


def _parser():
    from argparse import SUPPRESS

    Parser = parser_class(BadInput, "{message}; see `{prog} --help`")  # one line, not argparse's usage block
    p = Parser(prog=PROG, description="Run jobs across a fleet through an object store (STADO_CONFIG selects it). Where a command takes a job (JOB, ID): its id, a display name (the newest job with it), a schedule's name (the newest job it fired) or a unique id prefix of at least 6 characters.",
               epilog="`stado COMMAND --help` explains each command; `stado --version` prints the version.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)

    s = sub.add_parser("submit", help="queue a shell command (or a batch file of them)",
                       description="Queue a shell command (or a batch file of them) and print the new job's id. Exit "
                                   "0: queued; 2: bad input (nothing written); 4: not queued (the store was not "
                                   "reached, or its answers show nothing landed); 7: could not tell whether it was "
                                   "queued (the id is printed anyway; `stado status ID` tells, and the same submit "
                                   "with --key again returns that job or finishes it).")
    s.add_argument("cmd", nargs="?", metavar="CMD", help="the shell command, run with /bin/sh -c")
    add_to_argparse(s, SUBMIT_OPTIONS)

    st = sub.add_parser("status", help="the queue by state, or one job")
    st.add_argument("id", nargs="?", metavar="JOB", help="an id, a name, a schedule's name (its newest fire) or a unique id prefix (6+ characters)")
    st.add_argument("--all", action="store_true", help="show every finished job, not only the latest 20")
    _json_flag(st)

    job = sub.add_parser("job", help="watch, rerun, hold or release a job")
    jsub = job.add_subparsers(dest="job_command", metavar="watch|rerun|hold|release", parser_class=Parser)
    w = jsub.add_parser("watch", help="state changes and output, live, until the job ends")
    w.add_argument("id", metavar="ID")
    w.add_argument("--interval", type=_float, default=1.0, help="seconds between looks (default 1)")
    _json_flag(w, "one JSON event per line")
    r = jsub.add_parser("rerun", help="submit the job's exact spec again under a new id (the same input artifacts)")
    r.add_argument("id", metavar="ID")
    inputs = r.add_mutually_exclusive_group()
    inputs.add_argument("--fresh-inputs", action="store_true",
                        help="resolve inputs given by a job name again (the newest job with it), instead of reading "
                             "the producers the original read")
    inputs.add_argument("--same-inputs", action="store_true", help=SUPPRESS)  # the default now: accepted, changes nothing
    r.add_argument("--beside", action="store_true",
                   help="rerun a job that has not finished yet (both then run); refused without it")
    r.add_argument("--key", help="an idempotency key, as `stado submit --key`: the same rerun again returns its job")
    _json_flag(r)
    for verb, what in (("hold", "keep a queued job from being claimed until it is released (exit 1 if it is not "
                                "queued: running or ended; nothing is written)"),
                       ("release", "let a held job be claimed again, in its place in the queue")):
        hr = jsub.add_parser(verb, help=what)
        hr.add_argument("id", metavar="ID|NAME")
        _json_flag(hr)

    wt = sub.add_parser("wait", help="wait until every named job has ended; exit with their status (as jobman wait)",
                        description="Wait until every JOB has ended. Exit status: 0 if all succeeded, else that of "
                                    "the first job (in argument order) that did not, through the table `jobman wait` "
                                    "uses (its exit code, 128+N for signal N, 124 timed out, 125 cancelled, 123 lost, "
                                    "127 never started, 119 cost cap); 120 if --timeout gave up first (the jobs go "
                                    "on); 3 if a JOB names no job (nothing is waited for).")
    wt.add_argument("ids", nargs="+", metavar="JOB", help="a job id or name")
    wt.add_argument("--timeout", type=argparse_type(_duration), metavar="D",
                    help="give up after D, e.g. 90s or 2h (exit 120 with a message; the jobs go on)")
    wt.add_argument("--interval", type=_float, default=1.0,
                    help="the most seconds between looks (default 1; the first looks come faster)")
    _json_flag(wt)

    lg = sub.add_parser("logs", help="a job's output as stored (every attempt's, in order), nothing else",
                        description="A job's output as its agent stored it (redacted of the secrets the agent knows), "
                                    "every attempt's in order, with no state lines or attempt headers (`stado job "
                                    "watch` adds those). --follow streams new output until the job ends, then exits "
                                    "with the job's exit status, as `stado job watch` does.")
    lg.add_argument("id", metavar="JOB", help="an id, a name, a schedule's name or a unique id prefix (6+ characters)")
    lg.add_argument("-n", "--tail", type=argparse_type(_whole), metavar="N", help="only the last N lines")
    lg.add_argument("-f", "--follow", action="store_true", help="keep streaming until the job ends")
    lg.add_argument("--attempt", type=argparse_type(_positive), metavar="N", help="only attempt N")
    lg.add_argument("--interval", type=_float, default=0.5, help="with --follow: seconds between looks (default 0.5)")

    c = sub.add_parser("cancel", help="cancel a queued or running job (exit 0: it will not run again; exit 1: it had "
                                      "already ended otherwise, and nothing was written; exit 4: the store could not "
                                      "be reached and nothing was written; exit 7: could not tell whether the cancel "
                                      "landed, `stado status ID` tells)")
    c.add_argument("id", metavar="ID|NAME")
    c.add_argument("--reason")
    _json_flag(c)

    q = sub.add_parser("queue", help="pause or resume claiming")
    qsub = q.add_subparsers(dest="queue_command", metavar="pause|resume", parser_class=Parser)
    qp = qsub.add_parser("pause", help="agents stop claiming; submissions are still accepted")
    qp.add_argument("--reason")
    _json_flag(qp)
    _json_flag(qsub.add_parser("resume", help="agents claim again"))

    m = sub.add_parser("machine", help="machine-readable views")
    msub = m.add_subparsers(dest="machine_command", metavar="status|may-delete", parser_class=Parser)
    ms = msub.add_parser("status", help="JSON: state, terminal, outcome, exit code, timestamps")
    ms.add_argument("id", metavar="ID")
    md = msub.add_parser("may-delete", help="exit 0 if no job is alive on the instance (its VM may be deleted), 1 "
                                            "naming the jobs that are")
    md.add_argument("instance_ref", metavar="INSTANCE_REF", help="as jobs record it, e.g. local@HOST")
    md.add_argument("--margin", type=_float, default=2.0,
                    help="seconds past a promise before it counts as passed (clocks disagree a little; default 2)")
    _json_flag(md)

    res = sub.add_parser("results", help="download and verify a job's artifacts")
    res.add_argument("id", metavar="ID")
    res.add_argument("dir", metavar="DIR")
    _json_flag(res)

    from .agentcli import add_agent_parser

    add_agent_parser(sub)

    sch = sub.add_parser("schedule", help="submit jobs on a cron (every agent fires them; one job per fire time)")
    schsub = sch.add_subparsers(dest="schedule_command", metavar="add|list|rm|pause|resume", parser_class=Parser)
    sa = schsub.add_parser("add", help='NAME "CRON" [flags] -- CMD...: a job per fire time (the flags of submit, '
                                       'but --batch)')
    sa.add_argument("sched_name", metavar="NAME")
    sa.add_argument("cron", metavar="CRON", help="five fields, e.g. '*/15 * * * *' (cronsim syntax)")
    sa.add_argument("--tz", default="UTC", help="the zone the cron expression is read in (default UTC)")
    add_to_argparse(sa, [o for o in SUBMIT_OPTIONS if o.dest not in ("batch", "key")])  # a schedule: a job per fire
    sa.epilog = ("The command comes last, after --: stado schedule add nightly '0 3 * * *' --cores 4 -- make all. "
                 "Each fired job is named NAME unless --name says otherwise; --input is resolved and --upload stored "
                 "once, when the schedule is added, so every fired job reads the same producer's artifact and the "
                 "same uploaded bytes.")
    sl = schsub.add_parser("list", help="every schedule, its next fire time and what it fired")
    _json_flag(sl)
    for verb, what in (("rm", "remove a schedule (jobs it fired are kept)"), ("pause", "stop firing (until resume)"),
                       ("resume", "fire again (missed fire times are skipped)")):
        sp = schsub.add_parser(verb, help=what)
        sp.add_argument("sched_name", metavar="NAME")
        _json_flag(sp)

    rr = sub.add_parser("reap", help="one reaper pass (or, with --watch, one every --every seconds): requeue "
                                     "(or fail) jobs whose worker stopped speaking")
    rr.add_argument("--margin", type=_float, default=2.0,
                    help="seconds past a promise before it counts as passed (clocks disagree a little; default 2)")
    rr.add_argument("--watch", action="store_true",
                    help="keep reaping until interrupted, as an agent's reaper does: a job is reaped only once this "
                         "reaper has also seen its record unchanged for its promised lease, on its own clock, so a "
                         "clock running ahead never requeues a live job (it waits one lease after starting)")
    rr.add_argument("--every", type=_float, metavar="S", help="with --watch: seconds between passes (default 30)")
    rr.add_argument("--passes", type=argparse_type(_whole), metavar="N", help="with --watch: stop after N passes")
    _json_flag(rr)

    rp = sub.add_parser("repair", help="clear a job's corrupt records without losing the job")
    rp.add_argument("id", metavar="ID|NAME")
    _json_flag(rp)

    _json_flag(sub.add_parser("doctor", help="check the store: reachable, credentials, conditional writes, clock, queue"))

    ui = sub.add_parser("ui", help="a live web dashboard of the store's queue, running jobs, agents and schedules",
                        description="A live web dashboard: the queue in claim order (unschedulable jobs and why), "
                                    "running jobs with their agent, promise and pulse, agents, schedules, the pause, "
                                    "recent terminal jobs, costs, and each job's spec, attempts, output and artifacts; "
                                    "cancel, rerun, pause and resume behind a confirmation. Prints its URL, which "
                                    "carries a token made at each start (the page needs it); Ctrl-C stops the server. "
                                    "Needs the `ui` extra.")
    ui.add_argument("--host", default="127.0.0.1",
                    help="address to listen on (default 127.0.0.1: this machine only; another one is warned about)")
    ui.add_argument("--port", type=argparse_type(_port), default=0, help="port (default: a free one)")

    ck = sub.add_parser("checkpoint", help="inside a job: stage a checkpoint; its upload proves the job alive")
    cksub = ck.add_subparsers(dest="checkpoint_command", metavar="put", parser_class=Parser)
    cp = cksub.add_parser("put", help="stage files; the agent uploads them while the job runs")
    cp.add_argument("paths", nargs="*", metavar="PATH")
    cp.add_argument("--name", help="the checkpoint's name, for a single PATH (default: its base name)")

    art = sub.add_parser("artifact", help="inside a job: stage files as its artifacts")
    asub = art.add_subparsers(dest="artifact_command", metavar="put", parser_class=Parser)
    ap = asub.add_parser("put", help="stage files; the agent uploads them when the job ends")
    ap.add_argument("paths", nargs="*", metavar="PATH")
    ap.add_argument("--name", help="the artifact's name, for a single PATH (default: its base name)")
    return p


_float = argparse_type(_number)


def _positive(text: str) -> int:
    number = _whole(text)
    if number < 1:
        raise ValueError(f"{text} is not an attempt number: attempts count from 1")
    return number


def _duration(text: str) -> float:
    from runkit.durations import parse_duration

    return parse_duration(text)


def _port(text: str) -> int:
    port = _whole(text)
    if not 0 <= port <= 65535:
        raise ValueError(f"{text} is not a port: give 1-65535, or 0 for a free one")
    return port


def _store():
    from .objectstore.connect import store_from_environment

    return store_from_environment()


def _out(text: str) -> None:
    """Text for people: each line through runkit.printable, so other people's text that a view did not escape
    itself still never reaches the terminal as control (escaping is idempotent: what a view escaped stays)."""
    from runkit.printable import printable

    lines = text[:-1] if text.endswith("\n") else text
    sys.stdout.write("\n".join(printable(line) for line in lines.split("\n")) + "\n")


def _json(data) -> None:
    """JSON for scripts, as stored (ASCII: json's escapes keep every character)."""
    import json

    sys.stdout.write(json.dumps(data, indent=None, sort_keys=True) + "\n")


# -- commands ------------------------------------------------------------------------------------------

def cmd_submit(args) -> int:
    from . import submission
    from .batch import read_batch, submission_from_args

    if args.batch is not None:
        if args.cmd is not None:
            raise BadInput("give either a command or --batch FILE, not both")
        items = read_batch(args.batch, defaults=submission_from_args(args, command="true"))
    else:
        if args.cmd is None:
            raise BadInput("missing command: stado submit \"CMD\" (or --batch FILE)")
        items = [submission_from_args(args, command=args.cmd)]
    done = submission.queue_jobs(_store(), items)
    # Every job that may exist is printed, the one whose queueing could not be told too (stderr says which), so
    # that a script holds an id for each; the error that stopped a batch comes last, on stderr, with its code.
    shown = done.docs + ([done.unknown] if done.unknown is not None else [])
    if args.json:
        existing = set(done.existing)
        _json({"jobs": [{"id": doc.id, "name": doc.spec.name, "queued": True if doc is not done.unknown else None,
                         "existing": doc.id in existing, "indexed": doc.id not in done.unindexed} for doc in shown]})
    else:
        for doc in shown:
            _out(doc.id)
    for job_id, said in done.unindexed.items():
        sys.stderr.write(f"{PROG}: job {job_id} is queued, but its entry in the claim-order index could not be "
                         f"written ({said}): agents find it on their slow pass, at their start and every 5 minutes\n")
    if done.stopped is not None:
        raise done.stopped
    return 0


def cmd_status(args) -> int:
    from . import render

    store = _store()
    if args.id:
        from .documents import status_json
        from .lookup import find, view

        v = view(store, find(store, args.id))
        data = dict(status_json(v), spec=v.doc.spec.raw)
        if v.state == "queued":
            import time

            from .overview import waiting_now

            data["waiting"] = waiting_now(store, v.doc.spec, time.time())
        _json(data) if args.json else _out(render.job_details(data))
        return 0
    from .overview import overview

    ov = overview(store, finished_limit=None if args.all else 20)
    _json(render.overview_json(ov)) if args.json else _out(render.overview_table(ov))
    return 0


def cmd_machine_status(args) -> int:
    from .documents import status_json
    from .lookup import find, view

    store = _store()
    _json(status_json(view(store, find(store, args.id))))
    return 0


def cmd_watch(args) -> int:
    import json
    import time

    from runkit.printable import printable

    from .documents import iso
    from .watch import End, State, Waiting, events

    out, err = sys.stdout, sys.stderr
    for event in events(_store(), args.id, interval=max(args.interval, 0.05)):
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
    from .logs import follow, tail_of
    from .lookup import find

    store = _store()
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
    from runkit.outcomes import EXIT_WAIT_TIMED_OUT

    from .watch import wait

    if args.interval <= 0:
        raise BadInput("--interval takes seconds above 0, e.g. --interval 0.5")
    result = wait(_store(), args.ids, timeout=args.timeout, interval=args.interval)
    if args.json:
        _json(result)
    if result["timed_out"]:
        pending = [job["id"] for job in result["jobs"] if not job["terminal"]]
        sys.stderr.write(f"{PROG}: wait timed out; still unfinished: {', '.join(pending)} (they go on)\n")
        return EXIT_WAIT_TIMED_OUT
    if not args.json and len(result["jobs"]) > 1:
        from .render import shown

        for job in result["jobs"]:
            if job["exit_status"] != 0:
                sys.stderr.write(f"{job['id']}: {shown(job['outcome'])} (exit {job['exit_status']})\n")
    return result["exit_status"]


def cmd_rerun(args) -> int:
    from . import submission
    from .errors import OutcomeUnknown

    try:
        original, new = submission.rerun(_store(), args.id, fresh_inputs=args.fresh_inputs, beside=args.beside,
                                         key=args.key)
    except OutcomeUnknown as unknown:
        _out(str(unknown.job_id))  # as a submit does: the id of the job that may be queued
        raise
    if args.json:
        _json({"id": new.id, "rerun_of": original.id, "name": new.spec.name,
               "rerun_inputs": new.rerun_inputs, "inputs": new.spec.inputs})
    else:
        _out(new.id)
    return 0


def cmd_hold(args) -> int:
    from .jobs.hold import hold, release
    from .submission import whoami

    report = (hold if args.job_command == "hold" else release)(_store(), args.id, by=whoami())
    if args.json:
        _json({"id": report.job_id, "held": report.doc.held, "changed": report.changed, "message": report.message})
    else:
        _out(report.message)
    return 0


def cmd_cancel(args) -> int:
    from . import jobs

    report = jobs.cancel(_store(), args.id, reason=args.reason)
    if args.json:
        _json({"id": report.job_id, "result": report.kind, "honoured": report.honoured, "message": report.message,
               "state_before": report.view.state})
    else:
        _out(report.message)
    return 0 if report.honoured else 1  # 1: it had already ended otherwise; nothing was written


def cmd_results(args) -> int:
    from runkit.printable import printable

    from . import artifacts
    from .lookup import find
    from .transfer import progress_printer

    store = _store()
    job_id = find(store, args.id)
    shown = progress_printer(sys.stderr, f"{PROG}: results of {job_id}",
                             stalled_hint=f" (Ctrl-C stops it; `{PROG} results` again resumes from what arrived)"
                             ) if sys.stderr.isatty() else None
    got, refused = artifacts.results(store, job_id, args.dir, stall_timeout=store.stall_timeout, on_progress=shown)
    for entry in refused:
        sys.stderr.write(printable(f"{PROG}: {entry.get('name')!r} was not uploaded by the agent: {entry.get('reason')}")
                         + "\n")
    if args.json:
        _json({"id": job_id, "artifacts": got, "refused": refused})
    else:
        for entry in got:
            _out(f"{printable(entry['name'])}  {entry['size']} bytes  sha256 {entry['sha256']}  verified -> "
                 f"{printable(entry['path'])}")
        _out(f"{len(got)} artifact(s) of {job_id} in {printable(args.dir)}")
    return 0


def cmd_checkpoint_put(args) -> int:
    from .checkpoints import stage

    for entry in stage(args.paths, dict(os.environ), name=args.name):
        _out(f"staged checkpoint {entry['name']} ({entry['size']} bytes); uploaded while the job runs")
    return 0


def cmd_artifact_put(args) -> int:
    from .artifacts import stage

    for entry in stage(args.paths, dict(os.environ), name=args.name):
        _out(f"staged {entry['name']} ({entry['size']} bytes, sha256 {entry['sha256']}); uploaded when the job ends")
    return 0


from .clifleet import (cmd_agent, cmd_doctor, cmd_may_delete, cmd_pause, cmd_reap, cmd_repair,  # noqa: E402
                       cmd_resume, cmd_schedule_add, cmd_schedule_change, cmd_schedule_list, cmd_ui)

COMMANDS = {
    ("submit",): cmd_submit, ("status",): cmd_status, ("job", "watch"): cmd_watch, ("job", "rerun"): cmd_rerun,
    ("job", "hold"): cmd_hold, ("job", "release"): cmd_hold,
    ("cancel",): cmd_cancel, ("logs",): cmd_logs, ("wait",): cmd_wait, ("queue", "pause"): cmd_pause,
    ("queue", "resume"): cmd_resume,
    ("machine", "status"): cmd_machine_status, ("machine", "may-delete"): cmd_may_delete, ("results",): cmd_results,
    ("agent",): cmd_agent,
    ("artifact", "put"): cmd_artifact_put, ("checkpoint", "put"): cmd_checkpoint_put, ("repair",): cmd_repair, ("reap",): cmd_reap,
    ("schedule", "add"): cmd_schedule_add, ("schedule", "list"): cmd_schedule_list,
    ("schedule", "rm"): cmd_schedule_change, ("schedule", "pause"): cmd_schedule_change,
    ("schedule", "resume"): cmd_schedule_change, ("doctor",): cmd_doctor, ("ui",): cmd_ui,
}


def _fast_submit(argv: list[str]):
    """`stado submit` with well-formed options, read without argparse; None to let argparse read it."""
    if not argv or argv[0] != "submit":
        return None
    ns = fast_parse(argv[1:], SUBMIT_OPTIONS, max_positionals=1)
    if ns is None:
        return None
    positionals = ns.positionals  # type: ignore[attr-defined]  # fast_parse's Namespace carries them
    ns.command, ns.cmd = "submit", (positionals[0] if positionals else None)  # type: ignore[attr-defined]
    return ns


def main(argv: list[str] | None = None) -> int:
    from runkit.climain import leave, run_main

    code = run_main(lambda: _run(sys.argv[1:] if argv is None else argv), _failure, PROG)
    if argv is None and sys.argv[1:2] == ["submit"]:
        # A submit's writes are made (and synced, on the local directory) before it prints the id: the
        # interpreter's teardown would only add 2.5 ms to the one command scripts run thousands of times.
        leave(code)
    return code


def _run(argv: list[str]) -> int:
    args = _fast_submit(argv)
    if args is None:
        parser = _parser()
        if argv and argv[0] in ("--version", "-V"):
            sys.stdout.write(f"{PROG} {_version()}\n")
            return 0
        if not argv or argv[0] in ("-h", "--help", "help"):
            parser.print_help(sys.stdout if argv else sys.stderr)
            return 0 if argv else 2
        command_words = None
        if argv[:2] == ["schedule", "add"] and "--" in argv:  # the command is everything after --
            cut = argv.index("--")
            argv, command_words = argv[:cut], argv[cut + 1:]
        args = parser.parse_args(argv)
        args.cmd_words = command_words
    check_text(args)
    sub = getattr(args, f"{args.command}_command", None) if args.command in ("job", "queue", "machine",
                                                                             "artifact", "schedule", "checkpoint") else None
    key = (args.command, sub) if sub is not None else (args.command,)
    if key not in COMMANDS:
        raise BadInput(f"`stado {args.command}` needs a subcommand; see `stado {args.command} --help`")
    return COMMANDS[key](args)


# Arguments that name local files: any bytes a file name may hold are accepted (what becomes a stored name, an
# upload's or an artifact's, is checked where it is made). Every other text argument is stored or compared as text.
PATH_ARGS = frozenset(("dir", "work_root", "batch", "paths", "upload"))
SHOWN_AS = {"cmd": "CMD", "id": "ID", "sched_name": "NAME", "cron": "CRON", "dir": "DIR", "paths": "PATH",
            "instance_ref": "INSTANCE_REF", "ids": "JOB", "cmd_words": "the command after --"}


def check_text(args) -> None:
    """Every text argument means something: BadInput, in one line, for an empty value or one whose bytes are not
    UTF-8 (the shell passes any bytes; Python hands them over as lone surrogates, which no document can hold).
    One check over every parsed value, so an option added later is covered too."""
    from runkit.cliargs import text_problem

    for dest, value in vars(args).items():
        if dest == "positionals":  # the fast path's list, also set as `cmd`
            continue
        values = value if isinstance(value, list) else [value]
        for item in values:
            if not isinstance(item, str):
                continue
            problem = text_problem(item, empty_ok=dest in ("cmd", "cmd_words"), any_bytes=dest in PATH_ARGS)
            if problem:
                shown = SHOWN_AS.get(dest) or "--" + dest.replace("_", "-")
                hint = ("; a command may still make such bytes itself, e.g. printf '\\377'"
                        if dest in ("cmd", "cmd_words") and item else "")
                raise BadInput(f"{shown} {problem}{hint}")


def _failure(error: Exception) -> tuple[str, int] | None:
    """stado's errors as (one line, exit code); the store's keep their own root and are translated here too."""
    from runkit.printable import printable

    said = _said(error)
    return None if said is None else (printable(said[0]), said[1])  # a message may quote other people's text


def _said(error: Exception) -> tuple[str, int] | None:
    if isinstance(error, StadoError):
        return str(error), error.exit_code
    from .objectstore.base import AccessDenied, ConfigError, StoreError, StoreUnavailable

    if isinstance(error, ConfigError):
        return str(error), 2
    if isinstance(error, (StoreUnavailable, AccessDenied)):
        return str(error), 4
    if isinstance(error, StoreError):
        return f"object store error: {error}", 1
    if isinstance(error, OSError):  # a file or directory the command could not use: one line, never a traceback
        where = f" ({error.filename})" if getattr(error, "filename", None) else ""
        return f"{error.strerror or error}{where}", 1
    return None


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("jobman-stado")
    except PackageNotFoundError:
        return "(version unknown: not installed as a package)"
