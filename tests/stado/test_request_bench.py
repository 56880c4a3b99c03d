"""The request-cost benchmarks on a tiny scale, so that they cannot rot: bench/stado_requests.py runs every
scenario against a real SeaweedFS it starts itself (a missing `weed` makes it, and this test, fail: never
skip), and bench/stado_submit_time.py times a few submits. Benchmarks report numbers; what is checked here is
only that the scenarios happened and that the report holds together (each request on the wire paired with
the stado call that made it), never a timing nor a count the code under test may change."""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.mark.slow
def test_the_request_bench_counts_every_scenario_on_the_wire(tmp_path):
    out = tmp_path / "requests.json"
    done = subprocess.run(
        [sys.executable, str(BENCH / "stado_requests.py"), "--jobs", "4", "--idle-seconds", "2", "--run-seconds",
         "1.2", "--cron", "* * * * * *", "--bill-seconds", "6", "--json", str(out)], capture_output=True, text=True,
        timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(out.read_text())
    scenarios = {s["scenario"]: s for s in report["scenarios"]}
    assert list(scenarios) == ["once", "cancel-queued", "cancel-running", "reaped", "cron", "idle", "batch",
                               "bill-running", "bill-idle"]
    rows = [row for s in report["scenarios"] for row in s["rows"]]
    # A client's own retry would be a request with no call of its own: allowed once or twice on a busy machine.
    assert sum(row["stack"] is None for row in rows) <= 2, [r for r in rows if r["stack"] is None]
    assert all(row["kind"] in ("PUT", "GET", "HEAD", "LIST", "DELETE", "POST") for row in rows)

    def job_requests(name):
        return {(r["role"], r["kind"], r["shape"]) for r in scenarios[name]["rows"] if r["whose"] == "job"}

    once = job_requests("once")
    assert ("submit", "PUT", "queue/<id>.json") in once
    assert ("agent", "PUT", "running/<id>.json") in once and ("agent", "PUT", "completed/<id>.json") in once
    assert ("status", "GET", "completed/<id>.json") in once
    assert ("cancel", "PUT", "cancelled/<id>.json") in job_requests("cancel-queued")
    assert not {r for r in job_requests("cancel-queued") if r[0] == "agent"}  # nothing left for an agent to do
    assert ("agent-b", "PUT", "queue/<id>.json") in job_requests("reaped")  # the reaper's requeue
    assert scenarios["reaped"]["notes"]["requeues"] == 1
    assert ("agent", "PUT", "schedules/tick.json") in job_requests("cron")
    assert scenarios["batch"]["jobs"] == 4
    assert "| once |" in report["markdown"] and "Amortised: 4" in report["markdown"]
    # The bill: its three figures, the running job's renewals among them, and the three lines scripts read, last.
    assert [row["figure"] for row in report["bill"]] == ["once", "running", "idle"]
    assert report["bill"][1]["counts"]["PUT"] > 0 and report["bill"][2]["counts"]["LIST"] > 0
    last = done.stdout.strip().splitlines()[-3:]
    assert [re.fullmatch(r"dollars (once|running|idle): \$[0-9.]+ per (million jobs|job-hour|agent-month)", line)
            is not None for line in last] == [True] * 3, last


def test_the_bill_prices_each_request_kind_at_its_providers_list_price():
    sys.path.insert(0, str(BENCH))
    import bill

    counted = {"PUT": 1000, "LIST": 1000, "GET": 1000, "HEAD": 1000, "DELETE": 1000}
    assert bill.dollars(counted, "S3") == pytest.approx(0.005 * 2 + 0.0004 * 2)  # DELETE is free
    assert bill.dollars(counted, "Azure") == pytest.approx(0.0055 * 2 + 0.00044 * 2)
    [once, running, idle] = bill.bill({"PUT": 5, "GET": 5}, ({"PUT": 2}, 10.0), ({"LIST": 1}, 30.0))
    assert once["counts"] == {"PUT": 5e6, "GET": 5e6} and running["counts"] == {"PUT": 720.0}
    assert idle["counts"] == {"LIST": 86400.0} and bill.script_lines([running])[0] == "dollars running: $0.0036 per job-hour"


@pytest.mark.slow
def test_the_submit_time_bench_reports_every_phase(tmp_path):
    out = tmp_path / "submit.json"
    done = subprocess.run([sys.executable, str(BENCH / "stado_submit_time.py"), "--rounds", "2", "--importtime-runs",
                           "1", "--json", str(out)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(out.read_text())
    assert set(report["backends"]) == {"local directory", "SeaweedFS"}
    for backend in report["backends"].values():
        assert "read STADO_CONFIG" in backend["phases_ms"] and backend["submit_ms"] > 0
        assert any(name.startswith("stado") for name in backend["imports_ms"])
    assert "import obstore and objectstore.cloud" in report["backends"]["SeaweedFS"]["phases_ms"]
