"""stado at scale: the queue window, and claim throughput and fairness with several agents. Reports, never
asserts; requests are counted by stado.objectstore.metered.MeteredStore around the real backend.

    .venv/bin/python bench/stado_scale.py window [--jobs 10,100000] [--s3-jobs 10,20000] [--backends file,s3]
    .venv/bin/python bench/stado_scale.py drain [--jobs 1000] [--agents 1,2,4,8] [--slots 4] [--backends file,s3]

window: Q jobs are queued (library submissions, on threads) that the measured agent cannot run (they need a
capability it lacks). Its claim passes are then measured in this process: the first pass, and the steady state
once it has seen every entry (an entry known to be not for it costs nothing until its version changes). Then a
`stado agent` loop (a forked process, polling every 0.05 s) is given 20 urgent jobs one at a time (priority 5,
`true`): submit -> start and claim -> start are read from the job records.

drain: Q short jobs (`sleep 0.2`) are drained by N agents (forked processes, each an Agent with its own
metered store, --slots S, polling every second, --until-idle). Per agent: requests, CPU time of the agent
process (not of its jobs), claims, and lost claim races (a claim create that another agent won, or an index
entry whose job another agent had already taken when its ledger was read).
"""
from runkit.core.clock import SYSTEM
import argparse
import multiprocessing
import os
import resource
import signal
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from stado.store import cas  # noqa: E402
from stado import jobs  # noqa: E402
from stado.core import keys  # noqa: E402
from stado.queue import submission  # noqa: E402
from stado.agent import Agent, AgentConfig, claim_pass  # noqa: E402
from stado.core.documents import parse_iso  # noqa: E402
from stado.objectstore.metered import KINDS, MeteredStore  # noqa: E402
from stado.objectstore.connect import open_store  # noqa: E402
from stado.core.spec import JobSpec  # noqa: E402

BIN = Path(sys.executable).parent
# Spawned, not forked: a fork after obstore's runtime has run (the submissions, on threads) can hang the child.
FORK = multiprocessing.get_context("spawn")


class Backend:
    def __init__(self, name: str, url: str, options: dict, env: dict):
        self.name, self.url, self.options, self.env = name, url, options, env

    def open(self, prefix: str):
        return open_store(f"{self.url}/{prefix}", self.options, env=self.env)


def submit_many(store, specs: list[JobSpec], threads: int = 8) -> float:
    """Submit with the library on a few threads (a submission is two PUTs); returns seconds taken."""
    chunks = [specs[i::threads] for i in range(threads)]
    t0 = time.perf_counter()
    workers = [threading.Thread(target=lambda c=c: [submission.submit(store, [submission.Submission(s)],
                                                                      submitter="bench", clock=SYSTEM) for s in c])
               for c in chunks]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return time.perf_counter() - t0


def _config(tmp: Path, host: str, **kw) -> AgentConfig:
    return AgentConfig(work_root=str(tmp / "work"), stado_bin=str(BIN / "stado"), host=host, **kw)


# -- the queue window -------------------------------------------------------------------------------------

def window(backend: Backend, queued: int) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="stado-scale-"))
    prefix = f"window-{queued}-{os.getpid()}-{time.time_ns()}"
    inner = backend.open(prefix)
    submit_s = submit_many(inner, [JobSpec(f"true # {n}", capabilities=("elsewhere",)) for n in range(queued)])
    store = MeteredStore(inner)
    agent = Agent(store, _config(tmp, "idle", slots=1, poll_seconds=0.05), log=lambda line: None)
    passes = []
    for _ in range(queued // 1000 + 12):  # the first pass, then until every entry was seen once, then 10 more
        store.reset()
        t0 = time.perf_counter()
        agent.claim()
        passes.append((time.perf_counter() - t0, dict(store.counts)))
    first, steady = passes[0], passes[-10:]
    latency = urgent_latency(backend, prefix, queued, tmp)
    return {"backend": backend.name, "queued": queued, "submit_s": submit_s,
            "first_pass": first[1], "first_pass_ms": first[0] * 1000,
            "steady": {k: statistics.mean(p[1][k] for p in steady) for k in KINDS},
            "steady_ms": statistics.median(p[0] for p in steady) * 1000, **latency}


def _agent_process(backend: Backend, prefix: str, queued: int, tmp: Path, ready) -> None:
    agent = Agent(backend.open(prefix), _config(tmp, "urgent", slots=1, poll_seconds=0.05), log=lambda line: None)
    agent._index_due = float("inf")  # the slow cadence's whole-queue index check is not what is measured here
    for _ in range(queued // 1000 + 2):
        agent.claim()  # warm: every entry seen once, as an agent that has run a while has
    ready.set()
    agent.run()


def urgent_latency(backend: Backend, prefix: str, queued: int, tmp: Path, n: int = 20) -> dict:
    ready = FORK.Event()
    proc = FORK.Process(target=_agent_process, args=(backend, prefix, queued, tmp, ready))
    proc.start()
    ready.wait(900)
    store = backend.open(prefix)
    time.sleep(0.5)  # its first pass and its record written
    to_start, claim_to_start = [], []
    for i in range(n):
        job = submission.submit(store, [submission.Submission(JobSpec(f"true # urgent {i}", priority=5))],
                                submitter="bench", clock=SYSTEM)[0]["id"]
        deadline = time.monotonic() + 60
        while (found := cas.read(store, keys.terminal("completed", job), job)) is None:
            if time.monotonic() > deadline:
                raise SystemExit(f"urgent job {job} did not complete in 60 s")
            time.sleep(0.01)
        doc = found[0]
        spawned = parse_iso(doc["process"]["started_at"])
        to_start.append(spawned - parse_iso(doc["submitted_at"]))
        claim_to_start.append(spawned - parse_iso(doc["claimed_at"]))
    proc.terminate()
    proc.join(30)
    return {"submit_to_start_ms": statistics.median(to_start) * 1000,
            "claim_to_start_ms": statistics.median(claim_to_start) * 1000}


def window_table(rows: list[dict]) -> str:
    head = ("backend", "queued", "submit jobs/s", "first pass: LIST GET, ms", "steady pass: LIST GET, ms",
            "submit->start ms", "claim->start ms")
    body = [(r["backend"], f"{r['queued']:,}", f"{r['queued'] / r['submit_s']:.0f}",
             f"{r['first_pass']['LIST']} {r['first_pass']['GET']}, {r['first_pass_ms']:.1f}",
             f"{r['steady']['LIST']:.0f} {r['steady']['GET']:.0f}, {r['steady_ms']:.1f}",
             f"{r['submit_to_start_ms']:.0f}", f"{r['claim_to_start_ms']:.1f}") for r in rows]
    return _table([head] + body)


# -- claim throughput and fairness ------------------------------------------------------------------------

def _count_races(counts: dict) -> None:
    """In a drain agent's process: count its claims and lost claim races (same-interface wrappers)."""
    claim, read = jobs.claim, claim_pass.read

    def counting_claim(*args, **kwargs):
        got = claim(*args, **kwargs)
        counts["lost" if got is None else "claimed"] += 1
        return got

    def counting_read(store, key, *args, **kwargs):
        got = read(store, key, *args, **kwargs)
        if got is None and key.startswith(keys.QUEUE):
            counts["lost"] += 1  # the index named a job another agent had already taken
        return got

    jobs.claim, claim_pass.read = counting_claim, counting_read


def _drain_agent(backend: Backend, prefix: str, tmp: Path, i: int, slots: int, barrier, results) -> None:
    counts = {"claimed": 0, "lost": 0}
    _count_races(counts)
    store = MeteredStore(backend.open(prefix))
    agent = Agent(store, _config(tmp, f"bench{i}", slots=slots, poll_seconds=1.0, until_idle=True),
                  log=lambda line: None)
    barrier.wait(120)
    before = resource.getrusage(resource.RUSAGE_SELF)
    agent.run()
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    results.put({"requests": dict(store.counts), "cpu_s": cpu, **counts})


def drain(backend: Backend, queued: int, agents: int, slots: int) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="stado-scale-"))
    prefix = f"drain-{agents}-{os.getpid()}-{time.time_ns()}"
    store = backend.open(prefix)
    submit_many(store, [JobSpec(f"sleep 0.2 # {n}") for n in range(queued)])
    barrier, results = FORK.Barrier(agents), FORK.Queue()
    procs = [FORK.Process(target=_drain_agent, args=(backend, prefix, tmp, i, slots, barrier, results))
             for i in range(agents)]
    for p in procs:
        p.start()
    per_agent = [results.get(timeout=1800) for _ in procs]
    for p in procs:
        p.join(60)
    docs = [cas.read(store, e.key)[0] for e in store.list(keys.COMPLETED)]
    if len(docs) != queued or sum(a["claimed"] for a in per_agent) != queued:
        raise SystemExit(f"{len(docs)} of {queued} completed, {sum(a['claimed'] for a in per_agent)} claims")
    span = max(parse_iso(d["finished_at"]) for d in docs) - min(parse_iso(d["claimed_at"]) for d in docs)
    requests = {k: sum(a["requests"][k] for a in per_agent) for k in KINDS}
    claims = [a["claimed"] for a in per_agent]
    return {"backend": backend.name, "agents": agents, "slots": slots, "jobs_per_s": queued / span,
            "requests_per_job": {k: v / queued for k, v in requests.items()},
            "cpu_ms_per_job": sum(a["cpu_s"] for a in per_agent) * 1000 / queued,
            "lost_per_claim": sum(a["lost"] for a in per_agent) / queued,
            "claims_min_max": (min(claims), max(claims))}


def drain_table(rows: list[dict]) -> str:
    head = ("backend", "agents x slots", "jobs/s", "requests/job PUT GET LIST DELETE", "agent CPU ms/job",
            "lost races/claim", "jobs per agent (min-max)")
    body = [(r["backend"], f"{r['agents']} x {r['slots']}", f"{r['jobs_per_s']:.1f}",
             " ".join(f"{r['requests_per_job'][k]:.2f}" for k in KINDS), f"{r['cpu_ms_per_job']:.1f}",
             f"{r['lost_per_claim']:.2f}", "{}-{}".format(*r["claims_min_max"])) for r in rows]
    return _table([head] + body)


# -- running ----------------------------------------------------------------------------------------------

def _table(rows: list[tuple]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths)) + " |" for row in rows)


def backends(names: list[str]):
    """Yield each backend asked for (SeaweedFS started here on 127.0.0.1 and stopped after)."""
    if "file" in names:
        yield Backend("local directory", f"file://{tempfile.mkdtemp(prefix='stado-scale-store-')}", {}, {})
    if "s3" in names:
        from tests.stado.servers import start_seaweedfs

        server = start_seaweedfs(Path(tempfile.mkdtemp(prefix="stado-scale-weed-")))
        try:
            yield Backend("SeaweedFS (S3)", f"s3://{server.bucket}/scale", server.options, server.env)
        finally:
            server.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("window", "drain"))
    parser.add_argument("--backends", default="file,s3")
    parser.add_argument("--jobs", help="window: queue sizes (default 10,100000); drain: jobs (default 1000)")
    parser.add_argument("--s3-jobs", default=None, help="window: queue sizes on SeaweedFS (default: --jobs)")
    parser.add_argument("--agents", default="1,2,4,8")
    parser.add_argument("--slots", type=int, default=4)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    rows = []
    for backend in backends(args.backends.split(",")):
        if args.what == "window":
            sizes = args.s3_jobs if backend.url.startswith("s3") and args.s3_jobs else args.jobs or "10,100000"
            for q in (int(x) for x in sizes.split(",")):
                rows.append(window(backend, q))
                print(window_table(rows[-1:]), flush=True)
        else:
            for n in (int(x) for x in args.agents.split(",")):
                rows.append(drain(backend, int(args.jobs or 1000), n, args.slots))
                print(drain_table(rows[-1:]), flush=True)
    print()
    print(window_table(rows) if args.what == "window" else drain_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
