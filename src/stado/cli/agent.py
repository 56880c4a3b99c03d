"""`stado agent`'s flags, and the AgentConfig they build (checked before the store is reached)."""
import os
import sys

from runkit.cli.cliargs import argparse_type, non_negative, whole

from ..core.errors import BadInput

_whole, _number = argparse_type(whole), argparse_type(non_negative)


def add_agent_parser(sub) -> None:
    a = sub.add_parser("agent", help="claim and run jobs on this host")
    a.add_argument("--slots", type=_whole,
                   help="jobs run at once (default: one per core of this host, each job reserving its --cores)")
    a.add_argument("--poll-seconds", type=_number, default=5.0,
                   help="seconds between renewals, and the longest between two looks at the queue (default 5): an idle "
                        "agent looks once a poll (one LIST); on the local directory a submit wakes it at once")
    a.add_argument("--busy-poll-seconds", type=_number, default=0.5,
                   help="seconds between looks at the queue while they find work (default 0.5), doubled after each "
                        "look that finds none, up to --poll-seconds")
    a.add_argument("--work-root", help="where job work directories live (default ~/.local/state/stado/work)")
    a.add_argument("--host", help="host name in instance_ref local@HOST (default: this host's; for tests)")
    o = a.add_argument_group("what this agent offers (a job is claimed only when its envelope fits what is free)")
    o.add_argument("--capabilities", "--capability", action="append", default=[], metavar="CAP[,CAP]",
                   help="capabilities this agent declares (repeatable)")
    o.add_argument("--cores", type=_whole, help="cores jobs may reserve (default: this host's CPU count, or --slots "
                                                "if more)")
    o.add_argument("--memory", help="memory jobs may reserve, e.g. 64G (default: this host's physical memory)")
    o.add_argument("--accelerators", type=_whole, default=0, help="accelerators jobs may reserve (default 0)")
    o.add_argument("--accelerator-devices", metavar="ID[,ID]",
                   help="their device ids, given to each job in CUDA_VISIBLE_DEVICES and its siblings "
                        "(default 0..N-1)")
    o.add_argument("--provider", default="local", help="the provider jobs' --provider fences name (default local)")
    o.add_argument("--spot", action="store_true", help="this is a spot (preemptible) machine")
    o.add_argument("--price-per-hour", type=_number, metavar="USD",
                   help="what this agent costs per hour (0: nothing); a job's --cost-cap is judged by its share of "
                        "it. Without a price, jobs with a cost cap are not run here (unless their cap is advisory)")
    a.add_argument("--window", type=_whole, default=1000,
                   help="claim-order index entries one poll lists (one page; default 1000): the queue beyond it "
                        "costs nothing per poll")
    a.add_argument("--settle-seconds", type=_number, default=30.0,
                   help="seconds between reaper passes: finish moves crashed agents left half done, requeue (or fail) "
                        "jobs whose worker stopped speaking (default 30)")
    a.add_argument("--reap-margin", type=_number, default=2.0, metavar="S",
                   help="seconds past a job's promise before this agent's reaper judges it passed (default 2); the "
                        "keeper of each job this agent runs stops the job's processes within that margin once the "
                        "agent stops renewing (SIGTERM a quarter of it past the promise, SIGKILL by three quarters), "
                        "so give every agent and `stado reap --margin` of a fleet the same value")
    a.add_argument("--bridge-seconds", type=_number, default=30.0, metavar="S",
                   help="once this agent is gone (killed), how long each running job's keeper renews its claim for it, "
                        "so that the agent that next starts on this host (a service restart) takes the job over "
                        "rather than have it stopped and requeued (default 30; 0: stop and requeue at once)")
    a.add_argument("--store-wait", type=_number, default=60.0, metavar="S",
                   help="at start, how long to wait out a store that answers as unwell (503 SlowDown, 500, resets, "
                        "refused connections) before exiting 4 (default 60); refused credentials or a store that "
                        "ignores conditions are refused at once")
    a.add_argument("--kill-after", type=_number, default=10.0,
                   help="seconds from SIGTERM to SIGKILL when stopping a job's process group (default 10)")
    a.add_argument("--until-idle", action="store_true",
                   help="exit once nothing runs and nothing in the queue can be claimed")
    a.add_argument("--keep-work", action="store_true", help="keep each job's work directory after it ends")
    a.add_argument("--systemd-unit", nargs="?", const="user", choices=("user", "system"), metavar="user|system",
                   help="run no agent: print a systemd unit that runs this agent with these flags (Restart=always; "
                        "KillMode=process, so a restart leaves running jobs alone and the next agent takes them back; "
                        "STADO_CONFIG as now); `user` (the default) for `systemctl --user`, `system` for the system "
                        "manager. docs/stado.md shows installing it")
    a.add_argument("--drain", action="store_true",
                   help="run no agent: tell the agents running on this host (--work-root) to claim nothing new, hand "
                        "back what they have not started and finish what runs, and wait until they have exited")
    _forget_parser(a)


def _forget_parser(a) -> None:
    asub = a.add_subparsers(dest="agent_command", metavar="forget", parser_class=type(a))
    fg = asub.add_parser("forget", help="remove the record of an agent that is gone, so `stado status` stops listing "
                                        "it (refused for a live agent: exit 1)")
    fg.add_argument("agent_id", metavar="ID", help="the agent's id, or a unique prefix of it (as `stado status` shows)")
    fg.add_argument("--json", action="store_true", help="print JSON instead of text (for scripts)")


def config_from_args(args):
    from ..agent.config import AgentConfig
    from ..core.spec import parse_list, parse_memory
    from ..agent.hostfiles import default_work_root

    host = args.host or os.environ.get("STADO_HOST") or None
    extra = {"host": host} if host else {}
    if args.memory is not None:
        extra["memory"] = parse_memory(args.memory)
    devices = parse_list(args.accelerator_devices) if args.accelerator_devices is not None else ()
    if args.accelerator_devices is not None and not devices:
        raise BadInput("--accelerator-devices is empty: name the devices, e.g. --accelerator-devices 0,1")
    return AgentConfig(
        work_root=os.path.abspath(args.work_root or default_work_root()), stado_bin=own_program(),
        slots=args.slots if args.slots is not None else max(os.cpu_count() or 1, 1),
        poll_seconds=args.poll_seconds, busy_poll_seconds=args.busy_poll_seconds, capabilities=frozenset(c for v in args.capabilities for c in parse_list(v)),
        cores=args.cores, accelerators=args.accelerators, accelerator_devices=devices, provider=args.provider,
        spot=args.spot, price_per_hour=args.price_per_hour, kill_after=args.kill_after, reap_margin=args.reap_margin,
        store_wait=args.store_wait, keeper_bridge=args.bridge_seconds,
        settle_seconds=args.settle_seconds, until_idle=args.until_idle, window=args.window, keep_work=args.keep_work,
        subreaper=True, **extra).check()


def cmd_agent_forget(args) -> int:
    import time

    from ..commands.agents import forget
    from .common import open_store, out, print_json

    done = forget(open_store(), args.agent_id, now=time.time())
    print_json({"agent": done.agent_id, "forgotten": True, "record": done.record}) if args.json else out(done.message)
    return 0


def cmd_agent(args) -> int:
    from ..agent import run_agent
    from ..core.keys import READY
    from ..agent.hostfiles import prepare_work_root

    if args.drain:
        return _drain(args)
    config = config_from_args(args)
    if args.systemd_unit:
        sys.stdout.write(systemd_unit(args.systemd_unit, config))
        return 0
    prepare_work_root(config.work_root)  # an unusable work root is bad input, told before the store is reached
    from .common import open_store

    store = open_store()
    from ..objectstore.connect import same_store_environment

    config.store_env = same_store_environment()
    config.stall_seconds = store.stall_timeout
    from ..objectstore.base import StoreUnwell

    try:
        store.list_page(READY, limit=1)  # reach the store once before anything else: a bad config fails here, in one line
    except StoreUnwell:
        pass  # not the config: a store briefly unwell, which the agent's start-up probe waits for (guarantees.py)
    return run_agent(store, config)


def _drain(args) -> int:
    from ..agent.drain import drain
    from ..agent.hostfiles import default_work_root

    def say(line: str) -> None:
        sys.stdout.write(f"stado: {line}\n")
        sys.stdout.flush()

    drain(os.path.abspath(args.work_root or default_work_root()), say=say)
    return 0


def own_program() -> str:
    """STADO_BIN: the program this agent runs as, so a job calls back the same stado."""
    argv0 = sys.argv[0] if sys.argv and sys.argv[0] else ""
    if argv0 and not argv0.endswith(".py") and os.path.isfile(argv0) and os.access(argv0, os.X_OK):
        return os.path.abspath(argv0)
    beside = os.path.join(os.path.dirname(sys.executable), "stado")
    if os.access(beside, os.X_OK):
        return beside
    from runkit.system.proc import which

    return which("stado", os.environ.get("PATH")) or beside


def _unit_word(text: str) -> str:
    """One word of ExecStart=, quoted for systemd (which also expands % specifiers and $ variables)."""
    text = text.replace("%", "%%").replace("$", "$$")
    if text and all(c.isalnum() or c in "-_./:=,@+" for c in text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _agent_flags() -> list[str]:
    """The flags this `stado agent` was given, less --systemd-unit (and its value)."""
    argv = sys.argv[1:]
    words = argv[argv.index("agent") + 1:] if "agent" in argv else []
    out, skip = [], False
    for word in words:
        if skip:
            skip = False
            if word in ("user", "system"):
                continue
        if word == "--systemd-unit":
            skip = True
            continue
        if word.startswith("--systemd-unit="):
            continue
        out.append(word)
    return out


def systemd_unit(kind: str, config) -> str:
    """A unit running this agent: restarted whenever it ends; on stop or restart only the agent is signalled
    (KillMode=process), so jobs (each in a session of its own, in the unit's cgroup) keep running and the agent that
    starts next re-adopts them (its restart check) or settles what ended meanwhile."""
    exec_start = " ".join(_unit_word(w) for w in [config.stado_bin, "agent", *_agent_flags()])
    lines = ["# stado agent: written by `stado agent --systemd-unit " + kind + "`; see docs/stado.md, \"The agent as a "
             "service\"",
             "[Unit]", f"Description=stado agent on {config.host}",
             "After=network-online.target", "Wants=network-online.target", "",
             "[Service]", "Type=exec", f"ExecStart={exec_start}"]
    store_config = os.environ.get("STADO_CONFIG")
    if store_config:
        lines.append(f"Environment={_unit_word('STADO_CONFIG=' + os.path.abspath(store_config))}")
    else:
        lines.append("# Environment=STADO_CONFIG=/path/to/stado.toml   (none set: the per-user local directory store)")
    lines += [f"Environment={_unit_word('PATH=' + os.environ.get('PATH', '/usr/local/bin:/usr/bin:/bin'))}",
              "# The store's credentials, if the config does not say where they come from (AWS_*, AZURE_*, ...):",
              "# EnvironmentFile=/etc/stado/credentials",
              "Restart=always", "RestartSec=2",
              "# Only the agent is signalled on stop and restart: running jobs live on (each in its own session),",
              "# and the agent that starts next takes them back or settles what ended meanwhile.",
              "KillMode=process",
              "# SIGTERM: the agent claims nothing more and waits for its jobs; after this, SIGKILL ends the agent alone.",
              "TimeoutStopSec=30"]
    if kind == "system":
        lines += ["# The account jobs run as (the store's local directory and the work root are that user's):",
                  f"User={_user()}"]
    lines += ["", "[Install]", "WantedBy=" + ("multi-user.target" if kind == "system" else "default.target"), ""]
    return "\n".join(lines)


def _user() -> str:
    import pwd

    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return str(os.getuid())
