"""Where `stado submit true` spends its time: the interpreter's start, imports, parsing, STADO_CONFIG, the store's
client, the writes; on the local directory and on SeaweedFS (started here on 127.0.0.1), beside a bare `python -c
pass` in the same run (the rounds interleave, so drift in the machine's load hits every contender alike).

    .venv/bin/python bench/stado_submit_time.py [--rounds 30] [--importtime-runs 7] [--json FILE]

Three measurements, each a fresh process per round:
  - wall time of the real `stado submit true` (the venv's entry point), and of `python -c pass`;
  - bench/submit_phases.py: the same steps stado.cli.main takes, timed one by one from inside the process (its
    total plus a bare interpreter start should come near the real command's wall time: both are shown);
  - `python -X importtime` of the real command: what each top-level import costs (cumulative), per package.
Both backends read a STADO_CONFIG file (file:///... for the local directory), as a fleet's hosts do.
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

BIN = Path(sys.executable).parent
STADO = str(BIN / "stado")
PHASES = str(Path(__file__).resolve().parent / "submit_phases.py")


def config_env(tmp: Path, name: str, url: str, options: dict, env: dict) -> dict:
    config = tmp / f"{name}.toml"
    config.write_text("\n".join(["[store]", f"url = {json.dumps(url)}"]
                                + [f"{k} = {json.dumps(v)}" for k, v in sorted(options.items())]) + "\n")
    base = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "AZURE_", "GOOGLE_", "STADO_"))}
    return {**base, **env, "STADO_CONFIG": str(config), "XDG_DATA_HOME": str(tmp / "xdg")}


def wall(argv: list[str], env: dict) -> tuple[float, str]:
    t = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=True)
    return time.perf_counter() - t, done.stdout


def phases_of(stdout: str) -> dict[str, float]:
    line = next(line for line in stdout.splitlines() if line.startswith("phases "))
    return {name: float(ms) for name, ms in (item.rsplit("=", 1) for item in line[len("phases "):].split(";"))}


def importtime(env: dict) -> dict[str, float]:
    """ms of each import of `stado submit true`, cumulative (with what it imports), keyed "module" for a
    top-level import and "module < importer" for one made inside another's."""
    done = subprocess.run([sys.executable, "-X", "importtime", STADO, "submit", "true"], env=env, capture_output=True,
                          text=True, check=True)
    lines = []
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and "imported package" not in line:
            _, cumulative, name = line[len("import time:"):].split("|")
            lines.append((len(name) - len(name.lstrip()), name.strip(), int(cumulative) / 1000))
    out: dict[str, float] = {}
    for i, (depth, name, ms) in enumerate(lines):
        # -X importtime prints a module after everything it imported, one level shallower: its importer.
        importer = next((n for d, n, _ in lines[i + 1:] if d < depth), None)
        key = name if importer is None else f"{name} < {importer}"
        out[key] = out.get(key, 0.0) + ms
    return out


def median(values) -> float:
    return statistics.median(values) * 1000 if values else float("nan")


def measure(rounds: int, importtime_runs: int, backends: dict[str, dict]) -> dict:
    bare, real = [], {name: [] for name in backends}
    phases = {name: [] for name in backends}
    harness = {name: [] for name in backends}
    for env in backends.values():  # warm: the store's directory, the bucket prefix, the .pyc files
        wall([STADO, "submit", "true"], env)
    for _ in range(rounds):
        bare.append(wall([sys.executable, "-c", "pass"], dict(os.environ))[0])
        for name, env in backends.items():
            real[name].append(wall([STADO, "submit", "true"], env)[0])
            took, stdout = wall([sys.executable, PHASES], env)
            harness[name].append(took)
            phases[name].append(phases_of(stdout))
    imports = {name: [importtime(env) for _ in range(importtime_runs)] for name, env in backends.items()}
    result = {"rounds": rounds, "python_pass_ms": median(bare), "backends": {}}
    for name in backends:
        names = list(phases[name][0])
        result["backends"][name] = {
            "submit_ms": median(real[name]),
            "submit_p95_ms": sorted(real[name])[int(0.95 * (len(real[name]) - 1))] * 1000,
            "harness_ms": median(harness[name]),
            "phases_ms": {p: statistics.median(r[p] for r in phases[name]) for p in names},
            "imports_ms": {pkg: statistics.median(run.get(pkg, 0.0) for run in imports[name])
                           for pkg in imports[name][0]},
        }
    return result


def report(result: dict) -> str:
    base = result["python_pass_ms"]
    names = list(result["backends"])
    b = result["backends"]
    head = ("phase", *(f"{n} ms" for n in names), *(f"{n} / `python -c pass`" for n in names))
    rows = [head, tuple("---" for _ in head)]
    rows.append(("`python -c pass` (the interpreter's start; measured alone)", *(f"{base:.1f}" for _ in names),
                 *("1.00x" for _ in names)))
    longest = max(names, key=lambda n: len(b[n]["phases_ms"]))  # its order: a phase only one backend has in place
    phase_names = list(b[longest]["phases_ms"])
    for p in phase_names:
        cells = [b[n]["phases_ms"].get(p) for n in names]
        rows.append((p.strip() if not p.startswith("  ") else f"- {p.strip()}",
                     *("-" if c is None else f"{c:.1f}" for c in cells),
                     *("-" if c is None else f"{c / base:.2f}x" for c in cells)))
    sums = [base + sum(v for k, v in b[n]["phases_ms"].items() if not k.startswith("  ")) for n in names]
    rows.append(("start + the phases above", *(f"{s:.1f}" for s in sums), *(f"{s / base:.2f}x" for s in sums)))
    rest = [b[n]["submit_ms"] - s for n, s in zip(names, sums)]
    rows.append(("the rest: the entry script, and exit with every module loaded (wall - the above)",
                 *(f"{r:.1f}" for r in rest), *(f"{r / base:.2f}x" for r in rest)))
    rows.append(("bench/submit_phases.py, wall (its process)", *(f"{b[n]['harness_ms']:.1f}" for n in names),
                 *(f"{b[n]['harness_ms'] / base:.2f}x" for n in names)))
    rows.append(("**`stado submit true`, wall (median)**", *(f"**{b[n]['submit_ms']:.1f}**" for n in names),
                 *(f"**{b[n]['submit_ms'] / base:.2f}x**" for n in names)))
    rows.append(("`stado submit true`, wall (p95)", *(f"{b[n]['submit_p95_ms']:.1f}" for n in names),
                 *(f"{b[n]['submit_p95_ms'] / base:.2f}x" for n in names)))
    out = [f"{result['rounds']} interleaved rounds; medians. `python -c pass`: {base:.1f} ms.", "",
           "\n".join("| " + " | ".join(row) + " |" for row in rows)]
    imports = {n: b[n]["imports_ms"] for n in names}
    top = [p for p in {p for n in names for p in imports[n]} if " < " not in p]
    inner = [p for p in {p for n in names for p in imports[n]} if " < " in p]
    head = ("import (`python -X importtime`, cumulative: with what it imports)", *(f"{n} ms" for n in names))
    rows = [head, tuple("---" for _ in head)]
    for group, least in ((top, 0.3), (inner, 1.0)):  # top-level imports, then the large ones inside them
        for p in sorted(group, key=lambda p: -max(imports[n].get(p, 0.0) for n in names)):
            cells = [imports[n].get(p, 0.0) for n in names]
            if max(cells) >= least:
                rows.append((f"`{p}`" if group is top else f"- `{p.split(' < ')[0]}` (imported by "
                             f"`{p.split(' < ')[1]}`)", *(f"{c:.1f}" for c in cells)))
    rows.append(("all top-level imports", *(f"{sum(v for k, v in imports[n].items() if ' < ' not in k):.1f}"
                                            for n in names)))
    out += ["", "\n".join("| " + " | ".join(row) + " |" for row in rows)]
    if len(names) == 2:
        rtt = b[names[1]]["phases_ms"].get("  of which: write 2, the ready/ index entry")
        gap = b[names[1]]["submit_ms"] - b[names[0]]["submit_ms"]
        out += ["", f"{names[1]} - {names[0]}: {gap:.1f} ms; one request's round trip on {names[1]} (write 2): "
                f"{rtt:.1f} ms, so the gap is {gap / rtt:.1f} round trips."]
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--importtime-runs", type=int, default=7)
    parser.add_argument("--backends", default="file,s3")
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="stado-submit-time-"))
    wanted = args.backends.split(",")
    backends, server = {}, None
    if "file" in wanted:
        (tmp / "store").mkdir()
        backends["local directory"] = config_env(tmp, "file", f"file://{tmp / 'store'}", {}, {})
    try:
        if "s3" in wanted:
            from tests.stado.servers import start_seaweedfs

            server = start_seaweedfs(tmp / "weed")
            backends["SeaweedFS"] = config_env(tmp, "s3", f"s3://{server.bucket}/submit-time", server.options,
                                               server.env)
        result = measure(args.rounds, args.importtime_runs, backends)
    finally:
        if server is not None:
            server.stop()
    text = report(result)
    print(text)
    if args.json:
        Path(args.json).write_text(json.dumps({**result, "markdown": text}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
