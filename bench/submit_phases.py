"""One `stado submit true`, made the way stado.cli.main makes it, with the time of each phase: run by
bench/stado_submit_time.py in a fresh interpreter each round (after the interpreter's own start, which a bare
`python -c pass` measures beside it). Reads STADO_CONFIG as the command does; prints the job's id, then one
line `phases NAME=MS;...` (nothing imported for the printing: the timings stay the command's own).
"""
from runkit.core.clock import SYSTEM
import sys
import time

clock = time.perf_counter
marks = [("", clock())]


def mark(name: str) -> None:
    marks.append((name, clock()))


import stado.cli as cli  # noqa: E402

mark("import stado.cli")
args = cli.fast_submit(["submit", "true"])
mark("parse the options (runkit.cli.fastargs)")
from stado.queue import submission  # noqa: E402
from stado.commands.batch import submission_from_args  # noqa: E402

mark("import submission, batch, spec")
items = [submission_from_args(args, command="true")]
mark("build and check the spec")
import os  # noqa: E402

from stado.objectstore import connect  # noqa: E402

mark("import objectstore.connect")
url, options = connect.load_config(os.environ["STADO_CONFIG"])
mark("read STADO_CONFIG")
if not url.startswith("file:"):
    import stado.objectstore.cloud  # noqa: F401
    from stado.objectstore.native import obstore

    obstore()  # the native module alone, as the command loads it

    mark("import obstore and objectstore.cloud")
store = connect.open_store(url, options)
mark("open the store (client built, no request)")

requests = []


def timed(verb):
    inner = getattr(store, verb)

    def call(*a, **kw):
        t = clock()
        try:
            return inner(*a, **kw)
        finally:
            requests.append(clock() - t)
    return call


store.put_if_absent, store.put = timed("put_if_absent"), timed("put")
docs = submission.submit(store, items, clock=SYSTEM)
mark("submit (ids, documents and both writes)")
sys.stdout.write(docs[0]["id"] + "\n")
mark("print the id")
phases = [(name, (t - marks[i][1]) * 1000) for i, (name, t) in enumerate(marks[1:])]
phases += [("  of which: write 1, create queue/ (the first request opens the connection)", requests[0] * 1000),
           ("  of which: write 2, the ready/ index entry", requests[1] * 1000)]
sys.stdout.write("phases " + ";".join(f"{name}={ms:.4f}" for name, ms in phases) + "\n")
