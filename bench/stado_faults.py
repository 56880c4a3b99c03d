"""stado through a store that is unwell: SeaweedFS (started here) behind tests/stado/faultproxy.py.

    .venv/bin/python bench/stado_faults.py [--runs N] [--storm-seconds S]

1. `stado submit true` and `stado status` (real processes) while every answer is held 0.5-3 s (the proxy's delay
   fault on every request): wall time, and the requests each made (the proxy's ledger).
2. A 503 storm (every request answered 503 SlowDown, unforwarded): what one call of each kind does with the
   default client settings (max_retries 4, retry_timeout 20): how many tries, over how long, what it says.
3. A `stado agent --until-idle` started in a storm of --storm-seconds: how long until it has run one job.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.stado import servers  # noqa: E402
from tests.stado.faultproxy import Rule, for_target, through  # noqa: E402
from tests.stado.storekit import make_target  # noqa: E402

STADO = str(Path(sys.executable).with_name("stado"))


def run(env, *args, timeout=300):
    started = time.monotonic()
    done = subprocess.run([STADO, *args], env=env, capture_output=True, text=True, timeout=timeout)
    return time.monotonic() - started, done


def spread(values):
    return f"median {statistics.median(values):.2f} s (min {min(values):.2f}, max {max(values):.2f})"


def delayed(target, tmp: Path, runs: int) -> None:
    with for_target(target, seed=1) as proxy:
        env = through(target, proxy).subprocess_env(tmp / "delayed")
        run(env, "submit", "true")  # the store's first objects, outside the figures
        proxy.add(Rule("delay", rate=1.0, delay=(0.5, 3.0)))
        for command in (["submit", "true"], ["status"]):
            took, requests = [], []
            for _ in range(runs):
                before = len(proxy.ledger)
                seconds, done = run(env, *command)
                if done.returncode != 0:
                    raise SystemExit(f"stado {' '.join(command)} exited {done.returncode}: {done.stderr.strip()}")
                took.append(seconds)
                requests.append(len(proxy.ledger) - before)
            print(f"stado {' '.join(command)} with every answer held 0.5-3 s: {spread(took)}; "
                  f"{statistics.median(requests):g} requests each")


def storm(target) -> None:
    from stado.objectstore.base import Version

    with for_target(target, seed=2) as proxy:
        store = through(target, proxy).open()
        calls = {"get": lambda: store.get("k"), "create": lambda: store.put_if_absent("n", b"x"),
                 "put-if-match": lambda: store.put_if_match("k", b"y", Version('"e"')),
                 "list": lambda: store.list_page(""), "conditional delete": lambda: store.delete_if_match(
                     "k", Version('"e"'))}
        proxy.storm(600)
        for kind, call in calls.items():
            before = len(proxy.ledger)
            started = time.monotonic()
            try:
                call()
                said = "succeeded?!"
            except Exception as e:  # what the user is told is the figure
                said = f"{type(e).__name__}: {e}"
            tries = proxy.ledger[before:]
            gaps = [f"{b.at - a.at:.2f}" for a, b in zip(tries, tries[1:])]
            print(f"503 storm, {kind}: {len(tries)} tries over {time.monotonic() - started:.2f} s "
                  f"(gaps {', '.join(gaps)} s)\n    {said}")


def agent_in_storm(target, tmp: Path, seconds: float) -> None:
    with for_target(target, seed=3) as proxy:
        env = through(target, proxy).subprocess_env(tmp / "storm")
        run(env, "submit", "echo ran")
        proxy.storm(seconds)
        took, done = run(env, "agent", "--until-idle", "--poll-seconds", "0.2", "--work-root", str(tmp / "work"),
                         timeout=seconds + 120)
        waited = [line for line in done.stderr.splitlines() if "answered after" in line]
        print(f"stado agent started in a {seconds:g} s 503 storm: exit {done.returncode} after {took:.1f} s; "
              f"{waited[0].split(': ', 1)[1] if waited else 'no wait logged'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--storm-seconds", type=float, default=8.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="stado-faults-") as scratch:
        tmp = Path(scratch)
        server = servers.start_seaweedfs(tmp / "seaweedfs")
        try:
            print(f"{time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores, Python {sys.version.split()[0]}, "
                  f"SeaweedFS ready in {server.start_seconds:.1f} s")
            delayed(make_target("s3", tmp, server), tmp, args.runs)
            storm(make_target("s3", tmp, server))
            agent_in_storm(make_target("s3", tmp, server), tmp, args.storm_seconds)
        finally:
            server.stop()


if __name__ == "__main__":
    main()
