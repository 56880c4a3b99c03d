"""The dashboards at scale (not a test): the page's first load and one live update, with 10,000 jobs in a jobman
home and 10,000 queued in stado (local-directory store), in Debian's headless Chromium driven by Playwright.

    .venv/bin/python bench/ui_bench.py [--jobs 10000] [--rounds 5] [--idle 30]

jobman: a real finished job cloned 10,000 times (bench/queue_bench.py's filler), plus a few real jobs waiting an
hour. First load: from navigation to the first page of rows (100) drawn; one live update: from `jobman cancel`
returning (the change committed) to the cancelled job's row saying so, without a reload. stado: 10,000 jobs
queued through the library (bench/stado_scale.py's submitter), no agent; first load: to the first 100 queue rows
drawn; one live update: from `stado submit --priority 10` returning to that job drawn first in claim order.
Also the server's own time for the page's data (the JSON call alone, through urllib). Medians of --rounds.
Target: each under 1 s on this project's 2-core VM.

Idle cost: the share of a core that the server and the browser (every Chromium process) take over --idle seconds
(CPU ticks from /proc/<pid>/stat) with one page open and nothing changing, and the server's with no page open.
Target: each under 1%.
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
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from queue_bench import _fill_finished  # noqa: E402  (bench/: this script runs from there)
from tests.ui.dashboard import CHROMIUM, CHROMIUM_ARGS, JOBMAN, STADO, Dashboard  # noqa: E402

TIMEOUT_MS = 30_000


def _median_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 1)


def _first_load(browser, url: str, rows: str, count: int) -> float:
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    start = time.perf_counter()
    page.goto(url)
    page.locator(rows).nth(count - 1).wait_for(timeout=TIMEOUT_MS)
    took = time.perf_counter() - start
    context.close()
    return took


def _until(page, condition: str, arg) -> float:
    """Seconds from now until the page's `condition` (a JS function of [arg]) holds, polled every 10 ms."""
    start = time.perf_counter()
    page.wait_for_function(condition, arg=[arg], timeout=TIMEOUT_MS, polling=10)
    return time.perf_counter() - start


def _open(browser, dash: Dashboard, rows: str):
    """A page on the dashboard with its first 100 rows drawn, and its context (to close)."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.goto(dash.url)
    page.locator(rows).nth(99).wait_for(timeout=TIMEOUT_MS)
    return context, page


def _summary(jobs: int, filled: float, loads: list[float], updates: list[float], api_ms: float) -> dict:
    return {"jobs": jobs, "fill_seconds": round(filled, 1), "first_load_ms": _median_ms(loads),
            "first_load_max_ms": round(max(loads) * 1000, 1), "live_update_ms": _median_ms(updates),
            "live_update_max_ms": round(max(updates) * 1000, 1), "api_page_ms": api_ms}


def _ticks(pid: int) -> int:
    """utime + stime of a process, in clock ticks (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0
    return int(fields[11]) + int(fields[12])


def _browser_pids() -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "cmdline").read_bytes().split(b"\0", 1)[0].endswith(b"chromium"):
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def idle_share(dash: Dashboard, seconds: float) -> dict:
    """The share of a core the server and the browser's processes took over `seconds` of nothing happening."""
    browser = {pid: _ticks(pid) for pid in _browser_pids()}
    server = _ticks(dash.proc.pid)
    time.sleep(seconds)
    server = _ticks(dash.proc.pid) - server
    spent = sum(max(0, _ticks(pid) - ticks) for pid, ticks in browser.items() if _ticks(pid))  # those still there
    spent += sum(_ticks(pid) for pid in _browser_pids() if pid not in browser)  # and any started meanwhile
    hz = os.sysconf("SC_CLK_TCK")
    return {"server_pct": round(100 * server / hz / seconds, 2), "browser_pct": round(100 * spent / hz / seconds, 2)}


def _idle(browser, dash: Dashboard, rows: str, seconds: float) -> dict:
    context, page = _open(browser, dash, rows)
    time.sleep(3)  # the first load's work is done
    open_page = idle_share(dash, seconds)
    context.close()
    time.sleep(2)
    return {"idle_open_page": open_page, "idle_no_page_server_pct": idle_share(dash, seconds)["server_pct"]}


def _api_ms(dash: Dashboard, path: str, rounds: int) -> float:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        status, _, _ = dash.request("GET", path)
        samples.append(time.perf_counter() - start)
        assert status == 200
    return _median_ms(samples)


def bench_jobman(browser, root: Path, jobs: int, rounds: int, idle: float) -> dict:
    home = root / "jobman-home"
    root.mkdir(parents=True)
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("JOBMAN_")}, "JOBMAN_HOME": str(home)}
    start = time.perf_counter()
    _fill_finished(home, env, jobs - 1)
    waiting = [subprocess.run([JOBMAN, "run", "--print-id", "--name", f"later-{n}", "--delay", "1h", "--", "true"], env=env,
                              capture_output=True, text=True, check=True).stdout.strip() for n in range(rounds)]
    filled = time.perf_counter() - start
    dash = Dashboard([JOBMAN, "ui"], env)
    try:
        loads = [_first_load(browser, dash.url, "[data-testid=job-row]", 100) for _ in range(rounds)]
        context, page = _open(browser, dash, "[data-testid=job-row]")
        updates = []
        for job in waiting:
            subprocess.run([JOBMAN, "cancel", job], env=env, capture_output=True, check=True)
            updates.append(_until(page, "([id]) => document.querySelector(`tr[data-job-id='${id}'] "
                                        "[data-testid=state]`).textContent === 'cancelled'", job))
        context.close()
        api = _api_ms(dash, "/api/jobs", rounds)
        quiet = _idle(browser, dash, "[data-testid=job-row]", idle)
    finally:
        assert dash.stop() == 0, dash.stderr
    return {**_summary(jobs + rounds, filled, loads, updates, api), **quiet}


def bench_stado(browser, root: Path, jobs: int, rounds: int, idle: float) -> dict:
    from stado.objectstore.connect import open_store
    from stado.core.spec import JobSpec
    from stado_scale import submit_many

    store_dir = root / "store"
    config = root / "stado.toml"
    config.write_text(f'[store]\nurl = "file://{store_dir}"\n')
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("STADO_")}, "STADO_CONFIG": str(config),
           "XDG_DATA_HOME": str(root / "xdg")}
    store = open_store(f"file://{store_dir}", {})
    specs = [JobSpec(f"python train.py --seed {n}", name=f"sweep-{n}", capabilities=("gpu",) if n % 10 == 0 else ())
             for n in range(jobs)]
    filled = submit_many(store, specs)
    assert len(list(store.list("queue/"))) == jobs
    dash = Dashboard([STADO, "ui"], env)
    try:
        loads = [_first_load(browser, dash.url, "[data-testid=queue-row]", 100) for _ in range(rounds)]
        context, page = _open(browser, dash, "[data-testid=queue-row]")
        updates = []
        for n in range(rounds):
            job = subprocess.run([STADO, "submit", "--priority", str(10 + n), "--name", f"urgent-{n}", "true"],
                                 env=env, capture_output=True, text=True, check=True).stdout.strip()
            updates.append(_until(page, "([id]) => document.querySelector('[data-testid=queue-row]')?.dataset.jobId"
                                        " === id", job))
        context.close()
        api = _api_ms(dash, "/api/board", rounds)
        quiet = _idle(browser, dash, "[data-testid=queue-row]", idle)
    finally:
        assert dash.stop() == 0, dash.stderr
        store.close()
    return {**_summary(jobs + rounds, filled, loads, updates, api), **quiet}


def render(report: dict) -> str:
    lines = ["| dashboard | jobs | first load (median / max) | one live update (median / max) | page data alone "
             "| idle, page open: server / browser | idle, no page: server |", "|---|---|---|---|---|---|---|"]
    for tool, what in (("jobman", "in the home"), ("stado", "queued")):
        r = report[tool]
        lines.append(f"| `{tool} ui` | {r['jobs']:,} {what} | {r['first_load_ms']} / {r['first_load_max_ms']} ms | "
                     f"{r['live_update_ms']} / {r['live_update_max_ms']} ms | {r['api_page_ms']} ms | "
                     f"{r['idle_open_page']['server_pct']}% / {r['idle_open_page']['browser_pct']}% | "
                     f"{r['idle_no_page_server_pct']}% |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--idle", type=float, default=30.0, help="seconds of each idle measurement")
    parser.add_argument("--only", choices=("jobman", "stado"), help="one dashboard (no report file written)")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    report = {}
    with tempfile.TemporaryDirectory(prefix="ui-bench-") as tmp, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            if args.only in (None, "jobman"):
                print("... jobman", file=sys.stderr, flush=True)
                report["jobman"] = bench_jobman(browser, Path(tmp) / "jobman", args.jobs, args.rounds, args.idle)
                print(json.dumps(report["jobman"]), file=sys.stderr, flush=True)
            if args.only in (None, "stado"):
                print("... stado", file=sys.stderr, flush=True)
                (Path(tmp) / "stado").mkdir()
                report["stado"] = bench_stado(browser, Path(tmp) / "stado", args.jobs, args.rounds, args.idle)
                print(json.dumps(report["stado"]), file=sys.stderr, flush=True)
        finally:
            browser.close()
    if args.only:
        return 0
    report["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    results = ROOT / "bench" / "results"
    results.mkdir(exist_ok=True)
    (results / "ui.json").write_text(json.dumps(report, indent=2) + "\n")
    print(render(report))
    print(f"load average at the end: {report['load_average_at_end']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
