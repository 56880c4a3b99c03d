"""The shell completion scripts (and the words they complete to) and the web dashboard (`jobman ui`): parse,
call, render, with jobman.cli's helpers (imported when one of them runs; the dashboard inside cmd_ui alone)."""
import sys

from . import parser, whole


def cmd_completion(args: list[str]) -> int:
    p = parser("jobman completion", "Print a shell completion script. bash: eval \"$(jobman completion bash)\" in\n"
               "~/.bashrc; zsh: the same in ~/.zshrc; fish: jobman completion fish | source.")
    p.add_argument("shell", choices=("bash", "zsh", "fish"))
    ns = p.parse_args(args)
    from .completion import script

    sys.stdout.write(script(ns.shell))
    return 0


def cmd_jobs_words(args: list[str]) -> int:
    """Private: the handles and names a JOB argument completes to (for the completion scripts)."""
    from .completion import job_words

    sys.stdout.write("".join(f"{word}\n" for word in job_words()))
    return 0


def cmd_group_words(args: list[str]) -> int:
    """Private: the group names --group completes to (for the completion scripts)."""
    from .completion import group_words

    sys.stdout.write("".join(f"{word}\n" for word in group_words()))
    return 0


def cmd_ui(args: list[str]) -> int:
    p = parser("jobman ui", "A live web dashboard of this home's jobs: the list (filters, search), the dependency\n"
               "graph, a timeline of attempts, groups and their holders, each job with its log tailing live;\n"
               "cancel, restart, hold and release behind a confirmation. Prints its URL, which carries a token\n"
               "made at each start (the page needs it); Ctrl-C stops the server. Needs the `ui` extra.")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1: this machine only; another one is warned about)")
    p.add_argument("--port", type=whole("--port", 0, 65535), default=0, help="port (default: a free one)")
    ns = p.parse_args(args)
    from runkit.web.server import LaunchError, run

    from ..core.errors import BadInput

    def make_app(launch):
        from ..ui.app import create

        return create(launch)

    try:
        return run("jobman", ns.host, ns.port, make_app)
    except LaunchError as e:
        raise BadInput(str(e)) from None
