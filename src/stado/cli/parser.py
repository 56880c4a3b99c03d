"""stado's argparse parser (help and errors; a well-formed `stado submit` never builds it), one function per
command family."""
from argparse import SUPPRESS

from runkit.cli.cliargs import argparse_type, parser_class, whole
from runkit.cli.fastargs import add_to_argparse

from ..core.errors import BadInput
from .common import PROG, duration, json_flag, port, positive, seconds, selection_flags
from .options import SUBMIT_OPTIONS

DESCRIPTION = ("Run jobs across a fleet through an object store (STADO_CONFIG selects it). Where a command takes a "
               "job (JOB, ID): its id, a display name (the newest job with it), a schedule's name (the newest job it "
               "fired) or a unique id prefix of at least 6 characters.")
MARGIN_HELP = "seconds past a promise before it counts as passed (clocks disagree a little; default 2)"


def build():
    Parser = parser_class(BadInput, "{message}; see `{prog} --help`")  # one line, not argparse's usage block
    p = Parser(prog=PROG, description=DESCRIPTION,
               epilog="`stado COMMAND --help` explains each command; `stado --version` prints the version.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    # In the order `stado --help` lists them.
    _submit(sub)
    _status(sub)
    _job(sub, Parser)
    _wait_and_logs(sub)
    _control(sub, Parser)
    _machine_and_results(sub, Parser)
    from .agent import add_agent_parser

    add_agent_parser(sub)
    _schedules(sub, Parser)
    _fleet(sub)
    _in_job(sub, Parser)
    return p


def _submit(sub) -> None:
    s = sub.add_parser("submit", help="queue a shell command (or a batch file of them)",
                       description="Queue a shell command (or a batch file of them) and print the new job's id. Exit "
                                   "0: queued; 2: bad input (nothing written); 4: not queued (the store was not "
                                   "reached, or its answers show nothing landed); 7: could not tell whether it was "
                                   "queued (the id is printed anyway; `stado status ID` tells, and the same submit "
                                   "with --key again returns that job or finishes it).")
    s.add_argument("cmd", nargs="?", metavar="CMD", help="the shell command, run with /bin/sh -c")
    add_to_argparse(s, SUBMIT_OPTIONS)


def _status(sub) -> None:
    st = sub.add_parser("status", help="the queue by state, or one job (or several)",
                        description="Without JOB: the queue by state, the agents and why queued jobs wait; --state and "
                                    "--name keep the jobs that match (a filter that matches nothing says so, exit 0). "
                                    "With JOB (or several): each job's details.")
    selection_flags(st, "show")
    st.add_argument("--all", action="store_true", help="show every finished job, not only the latest 20")
    st.add_argument("--all-agents", action="store_true",
                    help="list every agent record, also those silent longer than --agents-window (gone)")
    st.add_argument("--agents-window", type=argparse_type(duration), metavar="D", default=3600.0,
                    help="agents silent longer than D (e.g. 30m, 2d; default 1h) are counted, not listed")
    json_flag(st)


def _job(sub, Parser) -> None:
    job = sub.add_parser("job", help="watch, rerun, hold or release a job")
    jsub = job.add_subparsers(dest="job_command", metavar="watch|rerun|hold|release", parser_class=Parser)
    w = jsub.add_parser("watch", help="state changes and output, live, until the job ends")
    w.add_argument("id", metavar="ID")
    w.add_argument("--interval", type=seconds, default=1.0, help="seconds between looks (default 1)")
    json_flag(w, "one JSON event per line")
    r = jsub.add_parser("rerun", help="submit the job's exact spec again under a new id (the same input artifacts)")
    selection_flags(r, "rerun")
    inputs = r.add_mutually_exclusive_group()
    inputs.add_argument("--fresh-inputs", action="store_true",
                        help="resolve inputs given by a job name again (the newest job with it), instead of reading "
                             "the producers the original read")
    inputs.add_argument("--same-inputs", action="store_true", help=SUPPRESS)  # the default now: accepted, changes nothing
    r.add_argument("--beside", action="store_true",
                   help="rerun a job that has not finished yet (both then run); refused without it")
    r.add_argument("--key", help="an idempotency key, as `stado submit --key`: the same rerun again returns its job "
                                 "(one job only)")
    json_flag(r)
    for verb, what in (("hold", "keep a queued job from being claimed until it is released (exit 1 if it is not "
                                "queued: running or ended; nothing is written)"),
                       ("release", "let a held job be claimed again, in its place in the queue")):
        hr = jsub.add_parser(verb, help=what)
        selection_flags(hr, verb)
        json_flag(hr)


def _wait_and_logs(sub) -> None:
    wt = sub.add_parser("wait", help="wait until every named job has ended; exit with their status (as jobman wait)",
                        description="Wait until every JOB has ended. Exit status: 0 if all succeeded, else that of "
                                    "the first job (in argument order) that did not, through the table `jobman wait` "
                                    "uses (its exit code, 128+N for signal N, 124 timed out, 125 cancelled, 123 lost, "
                                    "127 never started, 119 cost cap); 120 if --timeout gave up first (the jobs go "
                                    "on); 3 if a JOB names no job, or --state/--name match none (nothing is waited "
                                    "for).")
    selection_flags(wt, "wait for")
    wt.add_argument("--timeout", type=argparse_type(duration), metavar="D",
                    help="give up after D, e.g. 90s or 2h (exit 120 with a message; the jobs go on)")
    wt.add_argument("--interval", type=seconds, default=1.0,
                    help="the most seconds between looks (default 1; the first looks come faster)")
    json_flag(wt)

    lg = sub.add_parser("logs", help="a job's output as stored (every attempt's, in order), nothing else",
                        description="A job's output as its agent stored it (redacted of the secrets the agent knows), "
                                    "every attempt's in order, with no state lines or attempt headers (`stado job "
                                    "watch` adds those). --follow streams new output until the job ends, then exits "
                                    "with the job's exit status, as `stado job watch` does.")
    lg.add_argument("id", metavar="JOB", help="an id, a name, a schedule's name or a unique id prefix (6+ characters)")
    lg.add_argument("-n", "--tail", type=argparse_type(whole), metavar="N", help="only the last N lines")
    lg.add_argument("-f", "--follow", action="store_true", help="keep streaming until the job ends")
    lg.add_argument("--attempt", type=argparse_type(positive), metavar="N", help="only attempt N")
    lg.add_argument("--interval", type=seconds, default=0.5, help="with --follow: seconds between looks (default 0.5)")


def _machine_and_results(sub, Parser) -> None:
    m = sub.add_parser("machine", help="machine-readable views")
    msub = m.add_subparsers(dest="machine_command", metavar="status|may-delete", parser_class=Parser)
    ms = msub.add_parser("status", help="JSON: state, terminal, outcome, exit code, timestamps")
    ms.add_argument("id", metavar="ID")
    md = msub.add_parser("may-delete", help="exit 0 if no job is alive on the instance (its VM may be deleted), 1 "
                                            "naming the jobs that are")
    md.add_argument("instance_ref", metavar="INSTANCE_REF", help="as jobs record it, e.g. local@HOST")
    md.add_argument("--margin", type=seconds, default=2.0, help=MARGIN_HELP)
    json_flag(md)

    res = sub.add_parser("results", help="download and verify a job's artifacts")
    res.add_argument("id", metavar="ID")
    res.add_argument("dir", metavar="DIR")
    json_flag(res)


def _control(sub, Parser) -> None:
    c = sub.add_parser("cancel", help="cancel a queued or running job (exit 0: it will not run again; exit 1: it had "
                                      "already ended otherwise, and nothing was written; exit 4: the store could not "
                                      "be reached and nothing was written; exit 7: could not tell whether the cancel "
                                      "landed, `stado status ID` tells); several jobs: a line each, exit 0 if all "
                                      "were cancelled, else the status of the first that was not")
    selection_flags(c, "cancel")
    c.add_argument("--reason", help="why: kept with the cancel (`stado status ID`, --json and the dashboard show it)")
    json_flag(c)

    q = sub.add_parser("queue", help="pause or resume claiming")
    qsub = q.add_subparsers(dest="queue_command", metavar="pause|resume", parser_class=Parser)
    qp = qsub.add_parser("pause", help="agents stop claiming; submissions are still accepted")
    qp.add_argument("--reason")
    json_flag(qp)
    json_flag(qsub.add_parser("resume", help="agents claim again"))


def _schedules(sub, Parser) -> None:
    sch = sub.add_parser("schedule", help="submit jobs on a cron (every agent fires them; one job per fire time)")
    schsub = sch.add_subparsers(dest="schedule_command", metavar="add|list|rm|pause|resume", parser_class=Parser)
    sa = schsub.add_parser("add", help='NAME "CRON" [flags] -- CMD...: a job per fire time (the flags of submit, '
                                       'but --batch)')
    sa.add_argument("sched_name", metavar="NAME")
    sa.add_argument("cron", metavar="CRON", help="five fields, e.g. '*/15 * * * *', or six with seconds "
                                                   "first, e.g. '*/30 * * * * *' (cronsim syntax)")
    sa.add_argument("--tz", default="UTC", help="the zone the cron expression is read in (default UTC)")
    add_to_argparse(sa, [o for o in SUBMIT_OPTIONS if o.dest not in ("batch", "key")])  # a schedule: a job per fire
    sa.epilog = ("The command comes last, after --: stado schedule add nightly '0 3 * * *' --cores 4 -- make all. "
                 "Each fired job is named NAME unless --name says otherwise; --input is resolved and --upload stored "
                 "once, when the schedule is added, so every fired job reads the same producer's artifact and the "
                 "same uploaded bytes.")
    json_flag(schsub.add_parser("list", help="every schedule, its next fire time and what it fired"))
    for verb, what in (("rm", "remove a schedule (jobs it fired are kept)"), ("pause", "stop firing (until resume)"),
                       ("resume", "fire again (missed fire times are skipped)")):
        sp = schsub.add_parser(verb, help=what)
        sp.add_argument("sched_name", metavar="NAME")
        json_flag(sp)


def _fleet(sub) -> None:
    rr = sub.add_parser("reap", help="one reaper pass (or, with --watch, one every --every seconds): requeue "
                                     "(or fail) jobs whose worker stopped speaking")
    rr.add_argument("--margin", type=seconds, default=2.0, help=MARGIN_HELP)
    rr.add_argument("--watch", action="store_true",
                    help="keep reaping until interrupted, as an agent's reaper does: a job is reaped only once this "
                         "reaper has also seen its record unchanged for its promised lease, on its own clock, so a "
                         "clock running ahead never requeues a live job (it waits one lease after starting)")
    rr.add_argument("--every", type=seconds, metavar="S", help="with --watch: seconds between passes (default 30)")
    rr.add_argument("--passes", type=argparse_type(whole), metavar="N", help="with --watch: stop after N passes")
    json_flag(rr)

    rp = sub.add_parser("repair", help="clear a job's corrupt records without losing the job")
    rp.add_argument("id", metavar="ID|NAME")
    json_flag(rp)

    json_flag(sub.add_parser("doctor", help="check the store: reachable, credentials, conditional writes, clock, queue"))

    ui = sub.add_parser("ui", help="a live web dashboard of the store's queue, running jobs, agents and schedules",
                        description="A live web dashboard: the queue in claim order (unschedulable jobs and why), "
                                    "running jobs with their agent, promise and pulse, agents, schedules, the pause, "
                                    "recent terminal jobs, costs, and each job's spec, attempts, output and artifacts; "
                                    "cancel, rerun, pause and resume behind a confirmation. Prints its URL, which "
                                    "carries a token made at each start (the page needs it); Ctrl-C stops the server. "
                                    "Needs the `ui` extra.")
    ui.add_argument("--host", default="127.0.0.1",
                    help="address to listen on (default 127.0.0.1: this machine only; another one is warned about)")
    ui.add_argument("--port", type=argparse_type(port), default=0, help="port (default: a free one)")


def _in_job(sub, Parser) -> None:
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
