"""The one way both command lines end: `run_main(body, fail)` runs a command and turns what it raised into an
exit status, the same for jobman and stado.

- a closed pipe on stdout (`jobman list | head -1`) ends the command quietly with 0, as git and ls do: the
  reader had what it wanted. Python would otherwise print a second error when it flushes stdout at exit, so
  stdout is pointed at /dev/null first;
- Ctrl-C ends it with 130 (128 + SIGINT), nothing printed beyond the terminal's own ^C;
- the tool's own errors become one line on stderr and the tool's exit code: `fail(error)` says which, as
  (message, exit code), or None for an error that is not the tool's (a bug), which goes on as a traceback.
"""
import os
import sys

TYPE_CHECKING = False  # typing costs start-up: the annotations are read by the type checker alone
if TYPE_CHECKING:
    from collections.abc import Callable


def run_main(body: "Callable[[], int]", fail: "Callable[[Exception], tuple[str, int] | None]", prog: str) -> int:
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


def leave(code: int) -> None:
    """End the process at once with `code`, once stdout and stderr are flushed: no interpreter teardown (every
    module's dictionary cleared, every object freed one by one), which costs a command that has loaded its
    store's modules 2.5 ms, a sixth of a `stado submit`. Only for a command run as a program whose work is
    done and durable (nothing is left to close that the exit itself does not close): never returns."""
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
