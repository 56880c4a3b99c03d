"""`jobman run --from FILE.toml`: a pipeline file submitted whole, its edges wired by name, one handle per job in
file order; and `jobman wait --all` that answers the same however often it is asked."""
import json

from tests.helpers import wait_for

PIPELINE = """
[defaults]
retries = 0

[jobs.prepare]
command = ["sh", "-c", "echo prep >> {ledger}"]

[jobs.train1]
command = "echo train1 >> {ledger}"
after_success = ["prepare"]
env = {{ SEED = "1" }}

[jobs.train2]
command = "echo train2 >> {ledger}; exit 3"
after_success = ["prepare"]
env = {{ SEED = "2" }}

[jobs.train3]
command = "echo train3 $SEED >> {ledger}"
after_success = ["prepare"]
env = {{ SEED = "3" }}

[jobs.evaluate]
command = "echo evaluate >> {ledger}"
after_success = ["train1", "train2", "train3"]

[jobs.report]
command = "echo report >> {ledger}"
after = ["evaluate"]
"""


def test_a_pipeline_with_a_failing_stage_runs_as_wired_and_wait_all_answers_the_same(jobman, tmp_path):
    ledger = tmp_path / "ledger"
    path = tmp_path / "pipeline.toml"
    path.write_text(PIPELINE.format(ledger=ledger))
    done = jobman("run", "--from", str(path), check=True)
    handles = done.stdout.split()
    assert len(handles) == 6 and all(h.isdigit() for h in handles) and done.stderr == ""
    names = [jobman.show(h)["name"] for h in handles]
    assert names == ["prepare", "train1", "train2", "train3", "evaluate", "report"]  # file order
    first = jobman("wait", "--all", timeout=120)
    assert first.returncode == 3, first.stderr  # train2's own exit code: the first that did not succeed
    assert f"job {handles[2]} (train2): failed (exit status 3)" in first.stderr
    assert f"job {handles[4]} (evaluate): dependency_failed (exit status 122)" in first.stderr
    assert jobman("wait", "--all").returncode == 3  # asked again: the same answer
    states = {jobman.show(h)["name"]: jobman.show(h)["state"] for h in handles}
    assert states == {"prepare": "succeeded", "train1": "succeeded", "train2": "failed", "train3": "succeeded",
                      "evaluate": "dependency_failed", "report": "succeeded"}
    lines = ledger.read_text().splitlines()
    assert lines[0] == "prep" and sorted(lines[1:]) == ["report", "train1", "train2", "train3 3"]
    assert lines.index("report") > lines.index("train2")  # once evaluate could never run: it ran nothing
    evaluate = jobman.show(handles[4])
    assert [(d["handle"], d["condition"]) for d in evaluate["dependencies"]] == [
        (int(h), "success") for h in handles[1:4]]
    assert [(d["name"], d["condition"]) for d in jobman.show(handles[5])["dependencies"]] == [("evaluate", "end")]


def test_handles_come_in_file_order_whatever_order_the_edges_ask(jobman, tmp_path):
    earlier = jobman.run("true", opts=["--name", "fetched"])
    path = tmp_path / "p.toml"
    path.write_text('[jobs.report]\ncommand = ["true"]\nafter_success = ["build"]\n'
                    '[jobs.build]\ncommand = ["true"]\nafter_success = ["@fetched"]\ngroup = "default"\n')
    listed = json.loads(jobman("run", "--from", str(path), "--json", check=True).stdout)
    assert [(r["name"], r["index"]) for r in listed] == [("report", 1), ("build", 2)]
    report, build = listed
    assert build["handle"] < report["handle"]  # submitted after what it depends on, printed in file order
    assert [d["job"] for d in jobman.show(build["id"])["dependencies"]] == [earlier]
    assert jobman("wait", report["id"], timeout=60).returncode == 0
    ids = jobman("run", "--print-id", "--from", str(path), check=True).stdout.split()
    assert [jobman.show(i)["name"] for i in ids] == ["report", "build"]


def test_a_pipeline_is_refused_whole_before_anything_is_submitted(jobman, tmp_path):
    path = tmp_path / "pipeline.toml"
    path.write_text('[jobs.prepare]\ncommand = "true"\n[jobs.train]\ncommand = "true"\ncores = 4\n')
    refused = jobman("run", "--from", str(path))
    assert refused.returncode == 2
    assert refused.stderr == f"jobman: error: {path}: job train: field cores is not supported by jobman\n"
    path.write_text('[jobs.prepare]\ncommand = "true"\n[jobs.train]\ncommand = ["no-such-command-here"]\n')
    missing = jobman("run", "--from", str(path))
    assert missing.returncode == 2 and f"{path}: job train: " in missing.stderr and "no-such-command-here" in missing.stderr
    path.write_text('[jobs.train]\ncommand = "true"\nafter_success = ["@nosuchjob"]\n')
    unknown = jobman("run", "--from", str(path))
    assert unknown.returncode == 2 and "nosuchjob" in unknown.stderr and unknown.stderr.count("\n") == 1
    path.write_text('[jobs.train]\ncommand = "true"\nafter_success = ["@last"]\n')
    assert "@last would name" in jobman("run", "--from", str(path)).stderr
    path.write_text('[jobs.a]\ncommand = "true"\nafter = ["b"]\n[jobs.b]\ncommand = "true"\nafter = ["a"]\n')
    cycle = jobman("run", "--from", str(path))
    assert cycle.returncode == 2 and "cycle" in cycle.stderr
    assert jobman("run", "--from", str(path), "--", "true").returncode == 2
    path.write_text("".join(f"[jobs.j{n}]\ncommand = ['true']\n" for n in range(501)))
    large = jobman("run", "--from", str(path))
    assert large.returncode == 2 and "501 jobs, more than the 500 a pipeline file takes" in large.stderr
    assert jobman.count_jobs() == 0


def test_command_line_options_apply_to_every_job_and_the_file_overrides_them(jobman, tmp_path):
    jobman("group", "set", "batch", "--limit", "2", check=True)
    path = tmp_path / "p.toml"
    path.write_text('[jobs.one]\ncommand = "echo $WHO"\nenv = { WHO = "file" }\n'
                    '[jobs.two]\ncommand = ["true"]\ngroup = "default"\nretries = 3\n')
    one, two = jobman("run", "--from", str(path), "--group", "batch", "--env", "WHO=cli", "--retries", "1",
                      check=True).stdout.split()
    shown_one, shown_two = jobman.show(one), jobman.show(two)
    assert shown_one["group"] == "batch" and shown_one["spec"]["retry"]["retries"] == 1
    assert shown_two["group"] == "default" and shown_two["spec"]["retry"]["retries"] == 3
    assert jobman("wait", one, two, timeout=60).returncode == 0
    wait_for(lambda: "file" in jobman("logs", one).stdout, message="the job's own variable")
