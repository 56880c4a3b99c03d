"""The one way both command lines end: `run_main(body, fail)` runs a command and turns what it raised into an
exit status, the same for jobman and stado.

- a closed pipe on stdout (`jobman list | head -1`) ends the command quietly with 0, as git and ls do: the
  reader had what it wanted. Python would otherwise print a second error when it flushes stdout at exit, so
  stdout is pointed at /dev/null first;
- Ctrl-C ends it with 130 (128 + SIGINT), nothing printed beyond the terminal's own ^C;
- the tool's own errors become one line on stderr and the tool's exit code: `fail(error)` says which, as
  (message, exit code), or None for an error that is not the tool's (a bug), which goes on as a traceback;
- a standard stream closed when the command started (`jobman run -- true >&-`, `2>&-`) changes nothing the
  command does nor its exit status: Python leaves sys.stdout or sys.stderr None then, and the first write would
  end a command whose work was done (a job submitted and owned) in a traceback and exit 1. Each gets a stand-in,
  and what stdout's could not print is said on stderr when the command ends, where stderr is open.

`deliver(text, prog)` prints a command's result once what it reports is done: what stops it reaching stdout (a
full disk, a terminal gone) is said on stderr instead and never changes the exit status.
"""
import os
import sys

TYPE_CHECKING = False  # typing costs start-up: the annotations are read by the type checker alone
if TYPE_CHECKING:
    from collections.abc import Callable


def run_main(body: "Callable[[], int]", fail: "Callable[[Exception], tuple[str, int] | None]", prog: str) -> int:
    """prog: how the tool's lines begin ("jobman: error"); the tool's name is what precedes its first colon."""
    global _prog
    _prog = prog
    _stand_ins()
    try:
        return body()
    except BrokenPipeError:
        _quiet_stdout()
        return 0
    except KeyboardInterrupt:
        return 130
    except Exception as error:
        said = fail(error)
        if said is None:
            raise
        message, code = said
        try:
            sys.stderr.write(f"{prog}: {message}\n")
        except BrokenPipeError:
            pass  # nobody reads stderr either: the exit status still says it
        return code
    finally:
        _say_unprinted()


def deliver(text: str, prog: str) -> bool:
    """Print `text` (a command's result, once what it reports is done) on stdout, flushed. Whatever keeps it from
    stdout is said on stderr instead, with the text, and never raises: a job that is owned stays submitted with
    exit 0 whatever its handle could not be printed on. A reader that closed the pipe is quiet (as run_main).
    Whether it reached stdout."""
    global _stdout_lost
    if _stdout_lost is None:
        try:
            sys.stdout.write(text)
            sys.stdout.flush()
            return True
        except BrokenPipeError:
            _stdout_lost = ""
        except (OSError, ValueError) as error:
            _stdout_lost = getattr(error, "strerror", None) or str(error)
        _quiet_stdout()  # the interpreter's flush at exit must find nothing left to fail on
    if _stdout_lost:
        _note(prog, f"could not print on stdout ({_stdout_lost}): {text.rstrip()}")
    return False


_stdout_lost: str | None = None  # why deliver() could not print on stdout ("": its reader closed the pipe)
_kept = None  # the stand-in of a stdout closed at the start, until what it kept is said (run_main's end, leave)
_prog = ""  # run_main's prog


def _stand_ins() -> None:
    """Stand-ins for standard streams closed when the process started, which Python leaves None: each writes into
    memory, and its descriptor is /dev/null (so that no file the command opens lands on fd 1 or 2, and what it
    starts gets a descriptor there). stdout's is kept, for _say_unprinted."""
    global _kept
    if sys.stdout is not None and sys.stderr is not None:
        return
    import io

    from runkit.system import proc

    proc.ensure_std_fds()
    for name in ("stdout", "stderr"):
        if getattr(sys, name) is not None:
            continue
        stand_in = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="backslashreplace")
        setattr(sys, name, stand_in)
        if name == "stdout":
            _kept = stand_in


UNPRINTED_QUOTED = 600  # characters of what a closed stdout could not print that stderr repeats whole


def _say_unprinted() -> None:
    """Say on stderr (if it is open) what the stand-in of a closed stdout kept, once: short, whole (a job's handle)."""
    global _kept
    kept, prog, _kept = _kept, _prog, None
    if kept is None:
        return
    try:
        kept.flush()
        data = kept.buffer.getvalue()
    except (OSError, ValueError):
        return
    if not data:
        return
    text = data.decode("utf-8", "backslashreplace")
    lines = text.splitlines()
    if len(lines) == 1 and len(text) <= UNPRINTED_QUOTED:
        _note(prog, f"stdout is closed; it would have printed: {lines[0]}")
    elif len(text) <= UNPRINTED_QUOTED:
        _note(prog, "stdout is closed; it would have printed:\n" + text.rstrip("\n"))
    else:
        _note(prog, f"stdout is closed; {len(lines)} line(s) ({len(data)} bytes) it would have printed are lost")


def _note(prog: str, message: str) -> None:
    try:
        sys.stderr.write(f"{prog.split(':', 1)[0]}: {message}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass  # stderr cannot say it either: the exit status is still the command's


def leave(code: int) -> None:
    """End the process at once with `code`, once stdout and stderr are flushed: no interpreter teardown (every
    module's dictionary cleared, every object freed one by one), which costs a command that has loaded its
    store's modules 2.5 ms, a sixth of a `stado submit`. Only for a command run as a program whose work is
    done and durable (nothing is left to close that the exit itself does not close): never returns."""
    _say_unprinted()
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        code = 0  # the reader had what it wanted (as run_main says)
    except (OSError, ValueError):
        pass
    try:
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    os._exit(code)


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's flush at exit has nowhere to fail."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, ValueError):  # no usable stdout at all: nothing left to flush either
        pass
