"""The two readers of one option table agree: `jobman run` and `stado submit` read well-formed options
with runkit.cli.fastargs (no argparse on the start-up path) and fall back to argparse built from the same table.
Every input the table parser accepts must be parsed identically by that argparse, so every input argparse
refuses is refused; and what the command's own entry point makes of the input is what argparse makes of it.
"""
import contextlib
import io
import string

from hypothesis import given, strategies as st

from jobman.cli import run
from runkit.cli.fastargs import add_to_argparse, fast_parse, to_namespace
from stado.cli.options import SUBMIT_OPTIONS

from tests.fuzzing import examples


def _values():
    """Texts an option's value may be: well-formed ones of every converter, and what users mistype."""
    words = ["0", "1", "3", "-1", "-5", "1e3", "0x10", "1_000", " 4 ", "4294967296", "١٢", "2.5", "nan", "inf",
             "1s", "500ms", "2m", "1h30m", "1d", "-1s", "1x", "s", "36501d", "1.2.3s", "4G", "512k", "1MB", "30m",
             "allow", "require", "never", "constant", "exponential", "inherit", "clean", "allow:A,B", "gpu,ssd",
             "job:art.txt", "a=b", "K=V", "", " ", "-", "--", "-x", "--name", "=", "a b", "\t", "é", "\x00"]
    return st.one_of(st.sampled_from(words), st.text(max_size=12),
                     st.text(alphabet=string.digits + "-.eE_ smhd", max_size=8))


def _tokens(options, extra_flags=()):
    """Command lines built from the table: its flags whole, abbreviated or misspelt, with values joined by '='
    or given apart, or missing; and stray tokens."""
    flags = [f for o in options for f in o.flags] + list(extra_flags)
    flag = st.one_of(st.sampled_from(flags), st.sampled_from(flags).map(lambda f: f[:max(3, len(f) - 3)]),
                     st.sampled_from(["--nope", "-x", "-n", "--", "-", "---name", "--Name", "-h"]))
    piece = st.one_of(
        st.tuples(flag, _values()).map(lambda p: [p[0], p[1]]),
        st.tuples(flag, _values()).map(lambda p: [f"{p[0]}={p[1]}"]),
        flag.map(lambda f: [f]),
        _values().map(lambda v: [v]))
    return st.lists(piece, max_size=7).map(lambda pieces: [t for p in pieces for t in p])


def _quietly(fn, *args):
    """fn(*args), or "help" if argparse printed help and exited (a request, neither accepted nor refused)."""
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            return fn(*args)
    except SystemExit:
        return "help"


# -- jobman run -------------------------------------------------------------------------------------------

def _jobman_argparse(tokens):
    """What argparse, built from the table as `jobman run` builds it, makes of the options (None: refused)."""
    import argparse

    from jobman.cli import parser
    from jobman.core.errors import BadInput

    p = parser("jobman run", run.DESCRIPTION)
    add_to_argparse(p, run.OPTIONS)
    p.add_argument("command", nargs="*", help=argparse.SUPPRESS)
    try:
        return vars(to_namespace(p.parse_args(tokens), run.OPTIONS, "command"))
    except BadInput:
        return None


@examples(600)
@given(_tokens(run.OPTIONS))
def test_jobman_run_options_read_alike_by_both_parsers(tokens):
    from jobman.cli import parser
    from jobman.core.errors import BadInput

    fast = fast_parse(tokens, run.OPTIONS, max_positionals=0)
    slow = _quietly(_jobman_argparse, tokens)
    if fast is not None:
        assert slow not in (None, "help"), f"the table parser accepted what argparse refuses: {tokens!r}"
        assert vars(fast) == slow, tokens
    # The command's entry point (fast first, argparse after) agrees with argparse alone: the options are what
    # comes before the first `--`, the command what follows it.
    line = tokens + ["--", "true"]
    cut = line.index("--")
    options, command = line[:cut], line[cut + 1:]
    expected = _quietly(_jobman_argparse, options)
    try:
        got = _quietly(run.parse, line, parser)
    except BadInput:
        got = None
    if expected is None or (expected != "help" and expected["positionals"]):
        assert got is None, f"`jobman run` accepted what argparse refuses: {line!r}"
    elif expected != "help":
        ns, cmd = got
        assert (vars(ns), cmd) == (expected, command), line


# -- stado submit -----------------------------------------------------------------------------------------

def _stado_argparse(tokens):
    from stado.cli.parser import build
    from stado.core.errors import BadInput

    try:
        ns = vars(build().parse_args(["submit", *tokens]))
    except BadInput:
        return None
    return {k: ns[k] for k in [o.dest for o in SUBMIT_OPTIONS] + ["cmd"]}


@examples(600)
@given(_tokens(SUBMIT_OPTIONS))
def test_stado_submit_options_read_alike_by_both_parsers(tokens):
    from stado.cli import fast_submit

    fast = fast_submit(["submit", *tokens])
    slow = _quietly(_stado_argparse, tokens)
    if fast is not None:
        assert slow not in (None, "help"), f"the table parser accepted what argparse refuses: {tokens!r}"
        assert {k: getattr(fast, k) for k in [o.dest for o in SUBMIT_OPTIONS] + ["cmd"]} == slow, tokens


def test_the_generators_reach_both_sides():
    """The properties above are not vacuous: the table parser accepts some generated inputs, argparse refuses
    others (checked on fixed inputs of the shapes generated)."""
    from stado.cli import fast_submit

    assert fast_parse(["--name", "a", "--retries=2", "--after-success", "x"], run.OPTIONS, 0) is not None
    assert _quietly(_jobman_argparse, ["--retries", "-1"]) is None
    assert fast_submit(["submit", "true", "--cores", "2", "--capability", "gpu"]) is not None
    assert _quietly(_stado_argparse, ["--cores", "x"]) is None
