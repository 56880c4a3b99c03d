"""Start-up of `jobman run -- true` and `stado submit true` (local-directory store), this tree against
another copy of the sources, in one run: the rounds interleave, so drift in machine load hits both alike.

    .venv/bin/python bench/startup_ab.py BASELINE_SRC [--rounds N]

BASELINE_SRC is a `src` directory of another checkout (e.g. `git archive main src | tar -x -C /tmp/base`,
then `python -m compileall -q /tmp/base/src`); it is put first on PYTHONPATH, so the same venv's entry
points run the other sources (the supervisor follows: it is started from its package's directory).
Prints the median and p95 of each command, in ms, and the ratio to a bare `python -c pass`.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parent.parent


def timed(argv: list[str], env: dict) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def contender(name: str, src: Path, root: Path) -> dict:
    home, store = root / f"{name}-home", root / f"{name}-store"
    store.mkdir()
    config = root / f"{name}.toml"
    config.write_text(f'[store]\nurl = "file://{store}"\n')
    env = {**os.environ, "PYTHONPATH": str(src), "JOBMAN_HOME": str(home), "STADO_CONFIG": str(config)}
    return {"env": env, "samples": {"jobman run -- true": [], "stado submit true": []}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("baseline", type=Path)
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="startup-ab-") as tmp:
        root = Path(tmp)
        sides = {"baseline": contender("baseline", args.baseline.resolve(), root),
                 "this tree": contender("this", ROOT / "src", root)}
        bare = []
        for side in sides.values():  # create the database and the store outside the measurement
            subprocess.run([str(BIN / "jobman"), "run", "--", "true"], env=side["env"], check=True, capture_output=True)
            subprocess.run([str(BIN / "stado"), "submit", "true"], env=side["env"], check=True, capture_output=True)
        for _ in range(args.rounds):
            for side in sides.values():
                side["samples"]["jobman run -- true"].append(
                    timed([str(BIN / "jobman"), "run", "--", "true"], side["env"]))
                side["samples"]["stado submit true"].append(
                    timed([str(BIN / "stado"), "submit", "true"], side["env"]))
            bare.append(timed([sys.executable, "-c", "pass"], os.environ))
        for side in sides.values():  # let the supervisors end before their home goes
            listed = subprocess.run([str(BIN / "jobman"), "list", "--all", "--json"], env=side["env"], check=True,
                                    capture_output=True, text=True).stdout
            ids = [job["id"] for job in json.loads(listed)]
            subprocess.run([str(BIN / "jobman"), "wait", "-q", *ids], env=side["env"], capture_output=True)
    base = statistics.median(bare)
    print(f"python -c pass: {base * 1000:.1f} ms (median of {args.rounds})")
    print("| command | side | median | p95 | vs python -c pass |\n|---|---|---|---|---|")
    for command in ("jobman run -- true", "stado submit true"):
        for name, side in sides.items():
            values = sorted(side["samples"][command])
            p95 = values[min(len(values) - 1, int(len(values) * 0.95))]
            print(f"| `{command}` | {name} | {statistics.median(values) * 1000:.1f} ms | {p95 * 1000:.1f} ms"
                  f" | {statistics.median(values) / base:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
