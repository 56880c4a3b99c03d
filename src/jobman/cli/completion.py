"""`jobman completion bash|zsh|fish`: shell completion scripts.

Commands and their flags are listed once here (a test checks them against each command's --help);
JOB arguments complete from `jobman __jobs` (handles and names of the newest jobs).
"""
import os

SELECT = "--all --state --group --name"  # every command that acts on jobs takes these (jobman.cli.add_selection)
FLAGS = {
    "run": "--name --hold --print-id --cwd --env --env-policy --after-success --after-failure --after --not-before --delay --retries "
           "--retryable-exit-code --retry-delay --retry-backoff --retry-max-delay --retry-on-timeout --timeout "
           "--kill-after --group --priority --log-limit --separate-stderr --on-finish --array --from --json",
    "list": "--active --all --limit --state --group --name --hide-restarted --json",
    "ls": "--active --all --limit --state --group --name --hide-restarted --json",
    "show": "--env --json",
    "logs": "--attempt --stderr --follow --tail --json",
    "wait": f"{SELECT} --timeout --json --quiet",
    "cancel": f"{SELECT} --reason --json",
    "restart": f"--with-dependents --include-started --print-id {SELECT} --json",
    "signal": f"{SELECT} --json",
    "hold": f"{SELECT} --json",
    "release": f"{SELECT} --json",
    "priority": f"{SELECT} --json",
    "group": "--limit --json",
    "reconcile": "--json",
    "prune": f"{SELECT} --older-than --succeeded --json",
    "completion": "",
    "ui": "--host --port",
}
TAKES_JOB = ("show", "logs", "wait", "cancel", "restart", "signal", "hold", "release", "priority", "prune")
JOBS_SHOWN = 200  # handles and names offered for a JOB argument

BASH = """# jobman completion for bash: eval "$(jobman completion bash)"
_jobman() {
    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}" cmd="${COMP_WORDS[1]}" flags="" i
    if [ "$COMP_CWORD" -eq 1 ]; then
        COMPREPLY=($(compgen -W "%(commands)s --help --version" -- "$cur"))
        return
    fi
    if [ "$cmd" = run ]; then
        for ((i = 2; i < COMP_CWORD; i++)); do
            if [ "${COMP_WORDS[i]}" = "--" ]; then
                COMPREPLY=($(compgen -c -- "$cur"))
                return
            fi
        done
    fi
    case "$prev" in
        --after-success|--after-failure|--after)
            COMPREPLY=($(compgen -W "$(jobman __jobs 2>/dev/null)" -- "$cur")); return ;;
        --group)
            COMPREPLY=($(compgen -W "$(jobman __groups 2>/dev/null)" -- "$cur")); return ;;
        --state)
            COMPREPLY=($(compgen -W "%(states)s" -- "$cur")); return ;;
    esac
    case "$cmd" in
%(cases)s
    esac
    if [[ "$cur" == -* ]]; then
        COMPREPLY=($(compgen -W "$flags" -- "$cur"))
    elif [[ " %(takes_job)s " == *" $cmd "* ]]; then
        COMPREPLY=($(compgen -W "$(jobman __jobs 2>/dev/null)" -- "$cur"))
    elif [ "$cmd" = completion ]; then
        COMPREPLY=($(compgen -W "bash zsh fish" -- "$cur"))
    elif [ "$cmd" = group ] && [ "$COMP_CWORD" -eq 2 ]; then
        COMPREPLY=($(compgen -W "set list rm" -- "$cur"))
    fi
}
complete -o default -F _jobman jobman
"""

ZSH = """# jobman completion for zsh: eval "$(jobman completion zsh)" (uses zsh's bash completion layer)
autoload -U +X compinit && compinit
autoload -U +X bashcompinit && bashcompinit
""" + "%(bash)s"

FISH_HEAD = """# jobman completion for fish: jobman completion fish | source
complete -c jobman -f
complete -c jobman -n __fish_use_subcommand -a "%(commands)s"
complete -c jobman -n __fish_use_subcommand -l help -l version
complete -c jobman -n "__fish_seen_subcommand_from %(takes_job)s" -a "(jobman __jobs 2>/dev/null)"
complete -c jobman -n "__fish_seen_subcommand_from completion" -a "bash zsh fish"
complete -c jobman -n "__fish_seen_subcommand_from group" -a "set list rm"
"""


def script(shell: str) -> str:
    commands = " ".join(FLAGS)
    if shell in ("bash", "zsh"):
        cases = "\n".join(f'        {cmd}) flags="{flags}" ;;' for cmd, flags in FLAGS.items() if flags)
        bash = BASH % {"commands": commands, "cases": cases, "takes_job": " ".join(TAKES_JOB),
                       "states": " ".join(_states())}
        return bash if shell == "bash" else ZSH % {"bash": bash}
    if shell == "fish":
        lines = [FISH_HEAD % {"commands": commands, "takes_job": " ".join(TAKES_JOB)}]
        values = {"--after-success": "(jobman __jobs 2>/dev/null)", "--after-failure": "(jobman __jobs 2>/dev/null)",
                  "--after": "(jobman __jobs 2>/dev/null)", "--group": "(jobman __groups 2>/dev/null)",
                  "--state": " ".join(_states())}
        for cmd, flags in FLAGS.items():
            for flag in flags.split():
                value = f' -x -a "{values[flag]}"' if flag in values else ""
                lines.append(f'complete -c jobman -n "__fish_seen_subcommand_from {cmd}" -l {flag[2:]}{value}\n')
        return "".join(lines)
    from ..core.errors import BadInput

    raise BadInput(f"no completion for shell {shell!r}: use bash, zsh or fish")


def _states() -> tuple:
    from ..store.queries import STATE_WORDS

    return STATE_WORDS


def group_words(environ=os.environ) -> list[str]:
    """The groups' names (what --group completes to): the default one before the first submission."""
    from ..commands.api import State
    from ..store import database, queries

    st = State(environ, create=False, reading=True, notify=lambda message: None)
    if st.conn is None:
        return [database.DEFAULT_GROUP]
    return [row["name"] for row in queries.groups(st.conn, None) if row["name"].isprintable() and " " not in row["name"]]


def job_words(environ=os.environ) -> list[str]:
    """Handles and names of the newest jobs, newest first, then `last` (what a JOB argument completes to);
    none before the first submission. Quiet: a completion must not print notes into the user's line."""
    from ..commands.api import State
    from ..store.queries import newest_handles_and_names

    st = State(environ, create=False, reading=True, notify=lambda message: None)
    if st.conn is None:
        return []
    words = []
    for handle, name in newest_handles_and_names(st.conn, JOBS_SHOWN):
        if handle is not None:
            words.append(str(handle))
        if name and name not in words and name.isprintable() and " " not in name:
            words.append(name)
    return words + ["last"] if words else words
