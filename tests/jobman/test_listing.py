"""`jobman list` for hundreds of jobs: filters, columns, width, colour, places in line, lost jobs."""
import json
import os
import pty
import re
import signal
import struct
import subprocess
import fcntl
import termios

from tests.helpers import kill_all, wait_for
from tests.jobman.conftest import JOBMAN
from tests.jobman.test_reconcile import reconcile_until, running, target_pid

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-")
COLOUR = "\033["


def test_filters_by_state_group_and_name(jobman):
    jobman("group", "set", "build", "--limit", "2", check=True)
    ok = jobman.run("true", opts=["--name", "cc-main", "--group", "build"])
    bad = jobman.run("sh", "-c", "exit 1", opts=["--name", "cc-util", "--group", "build"])
    link = jobman.run("true", opts=["--name", "link"])
    jobman("wait", ok, bad, link)

    def ids(*args):
        return [j["id"] for j in json.loads(jobman("list", "--json", *args, check=True).stdout)]

    assert ids("--state", "failed") == [bad]
    assert ids("--state", "failed,succeeded") == [link, bad, ok] == ids("--state", "failed", "--state", "succeeded")
    assert ids("--group", "build") == [bad, ok]
    assert ids("--name", "cc-*") == [bad, ok]
    assert ids("--name", "cc-*", "--state", "succeeded") == [ok]
    assert ids("--name", "l?nk", "--group", "default") == [link]
    assert jobman("list", "--name", "nothing*", check=True).stdout == "no jobs match\n"
    refused = jobman("list", "--state", "bogus")
    assert refused.returncode == 2 and "unknown state 'bogus'" in refused.stderr
    assert len(refused.stderr.splitlines()) == 1


def test_the_table_fits_the_width_cutting_the_command_and_names_dependencies_shortly(jobman):
    first = jobman.run("true", opts=["--name", "prepare"])
    jobman("wait", first, check=True)
    jobman("group", "set", "paused", "--limit", "0", check=True)
    blocker = jobman.run("true", opts=["--group", "paused"])
    long_command = ["sh", "-c", "echo " + "word " * 60]
    waiting = jobman.run(*long_command, opts=["--after-success", blocker, "--after-success", "prepare"])
    wait_for(lambda: jobman.state(waiting)["waiting_for"] == "dependencies", timeout=20)
    for width in (60, 100):
        out = jobman("list", env={"COLUMNS": str(width)}, check=True).stdout
        lines = out.splitlines()
        assert lines[0].split()[:2] == ["#", "NAME"] and "STARTED" in lines[0] and "TIME" in lines[0]
        assert all(len(line) <= width for line in lines), out  # never wider: never wraps
        assert "…" in out
    wide = jobman("list", env={"COLUMNS": "400"}, check=True).stdout
    row = next(line for line in wide.splitlines() if line.startswith("3 "))
    assert "word " * 59 in row and "[dependencies not finished: job 2]" in row
    assert not UUID.search(wide)  # handles and names, not runs of full ids
    piped = jobman("list", check=True).stdout  # into a pipe, with no COLUMNS: nothing is cut
    assert "word " * 59 in piped and "…" not in piped
    jobman("cancel", blocker, waiting, check=True)


def _on_a_terminal(jobman, *args, env=None, columns=None) -> str:
    main, secondary = pty.openpty()
    if columns:
        fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    try:
        proc = subprocess.Popen([JOBMAN, *args], env={**jobman.env, **(env or {})}, stdout=secondary,
                                stderr=subprocess.DEVNULL)
        os.close(secondary)
        chunks = []
        while True:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # EIO: the other side is closed
                break
            if not chunk:
                break
            chunks.append(chunk)
        assert proc.wait(timeout=60) == 0
        return b"".join(chunks).decode()
    finally:
        os.close(main)


def test_outcomes_are_coloured_on_a_terminal_only(jobman):
    ok = jobman.run("true")
    bad = jobman.run("false")
    jobman("wait", ok, bad)
    coloured = _on_a_terminal(jobman, "list")
    assert "\033[32msucceeded\033[0m" in coloured and "\033[31mfailed (1)\033[0m" in coloured
    assert COLOUR not in _on_a_terminal(jobman, "list", env={"NO_COLOR": "1"})
    jobman.run("sh", "-c", "echo " + "long " * 40)
    narrow = _on_a_terminal(jobman, "list", "--state", "running,succeeded", columns=50)  # the terminal's own width
    assert all(len(re.sub(r"\033\[[0-9;]*m", "", line)) <= 50 for line in narrow.splitlines()), narrow
    assert COLOUR not in jobman("list", check=True).stdout  # piped


def test_places_in_line_are_true_and_consistent_when_printed(jobman):
    jobman("group", "set", "line", "--limit", "0", check=True)
    ids = [jobman.run("true", opts=["--group", "line"]) for _ in range(3)]
    urgent = jobman.run("true", opts=["--group", "line", "--priority", "5"])
    wait_for(lambda: all(jobman.state(j)["waiting_for"] == "slot" for j in [*ids, urgent]), timeout=20)
    listed = {j["id"]: j["wait_detail"] for j in json.loads(jobman("list", "--json", check=True).stdout)}
    assert listed[urgent].endswith("; next in line")
    assert [listed[j].rsplit("; ", 1)[1] for j in ids] == ["1 ahead in line", "2 ahead in line", "3 ahead in line"]
    jobman("hold", urgent, check=True)
    wait_for(lambda: jobman.state(urgent)["waiting_for"] == "held", timeout=20)
    listed = {j["id"]: j["wait_detail"] for j in json.loads(jobman("list", "--json", check=True).stdout)}
    assert [listed[j].rsplit("; ", 1)[1] for j in ids] == ["next in line", "1 ahead in line", "2 ahead in line"]
    jobman("cancel", *ids, urgent, check=True)


def test_a_lost_job_says_when_its_tree_is_gone(jobman):
    job_id, state = running(jobman, "sleep", "60")
    target = target_pid(jobman, job_id)
    os.kill(state["supervisor_pid"], signal.SIGKILL)
    reconcile_until(jobman, job_id, "lost")

    def listed_line():
        return next(line for line in jobman("list", check=True).stdout.splitlines() if line.startswith("1 "))

    assert "still alive" in listed_line()
    kill_all([target])
    wait_for(lambda: "target process tree is gone too" in listed_line(), timeout=10, message="list to say gone")
    assert "its target process tree is gone" in jobman.show(job_id)["lost_note"]


def test_a_long_queue_lists_its_newest_hundred_waiting_jobs_and_says_how_many_more_wait(jobman):
    """A sweep keeps thousands waiting: by default the list shows every running job, the newest 100 waiting
    and the newest 100 finished, and says on stderr how many it left out; --active and --all show them all."""
    jobman("group", "set", "sweep", "--limit", "0", check=True)
    running_job = jobman.run("sleep", "60")
    done = jobman.run("true")
    jobman("wait", done)
    ids = jobman("run", "--print-id", "--array", "1-105", "--group", "sweep", "--", "true", check=True).stdout.split()
    wait_for(lambda: all(jobman.state(j)["waiting_for"] == "slot" for j in ids), timeout=30)
    listed = jobman("list", "--json", check=True)
    shown = [j["id"] for j in json.loads(listed.stdout)]
    assert shown == ids[::-1][:100] + [done, running_job]  # newest first; the oldest 5 waiting left out
    assert listed.stderr == "jobman: 5 older waiting job(s) not shown (jobman list --all)\n"
    table = jobman("list", check=True).stdout.splitlines()
    assert len(table) == 1 + 102 and "104 ahead in line" in table[1]  # places count the whole line
    assert len(json.loads(jobman("list", "--active", "--json", check=True).stdout)) == 106
    assert len(json.loads(jobman("list", "--all", "--json", check=True).stdout)) == 107
    jobman("cancel", running_job, check=True)


def test_other_peoples_text_never_reaches_the_terminal_as_control(jobman):
    """A command containing an escape sequence retitled the terminal through list and show, and a newline
    split a row of the table. Shown escaped, one line per job; --json and logs stay byte-exact."""
    hostile = "echo '\x1b]0;pwned\x07'; printf 'two\\nlines'"
    job = jobman.run("sh", "-c", hostile, "x\ny")
    jobman("wait", job)
    listed = jobman("list", check=True).stdout
    shown = jobman("show", job, check=True).stdout
    for out in (listed, shown):
        assert "\x1b" not in out and "\x07" not in out, out
        assert "\\e]0;pwned\\x07" in out, out
    row = [line for line in listed.splitlines() if "pwned" in line]
    assert len(row) == 1 and "x\\ny" in row[0], listed            # the argument's newline did not split the row
    assert json.loads(jobman("show", job, "--json", check=True).stdout)["spec"]["argv"][-2:] == [hostile, "x\ny"]
    assert "\x1b]0;pwned\x07" in jobman("logs", job, check=True).stdout  # the job's output as it wrote it


def test_why_a_job_waits_for_a_slot_is_said_as_its_group_is_now(jobman, tmp_path):
    """A paused group of three waiting jobs is opened to one slot: the first runs, and the two behind it were never
    rung (only as many of a line as slots were freed are), so their recorded reason still said "paused (limit 0)"
    in list and show. The reason is read from the group as it is now."""
    gate = tmp_path / "gate"
    slow = {"JOBMAN_POLL_INTERVAL": "60s"}  # nothing but a ring wakes them
    jobman("group", "set", "g", "--limit", "0", check=True)
    ids = [jobman.run("sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.02; done", opts=["--group", "g"], env=slow)
           for _ in range(3)]
    wait_for(lambda: all(jobman.state(j)["waiting_for"] == "slot" for j in ids), timeout=30)
    jobman("group", "set", "g", "--limit", "1", check=True)
    wait_for(lambda: jobman.state(ids[0])["phase"] == "running", timeout=30)
    views = {v["id"]: v for v in json.loads(jobman("list", "--json", check=True).stdout)}
    assert views[ids[1]]["wait_detail"] == "group g is full (limit 1); next in line"
    assert views[ids[2]]["wait_detail"] == "group g is full (limit 1); 1 ahead in line"
    assert "waiting for: slot: group g is full (limit 1); 1 ahead in line" in jobman("show", ids[2]).stdout
    gate.touch()
    assert jobman("wait", *ids, timeout=60).returncode == 0


def test_show_of_a_job_lost_before_it_started_says_no_target_was_started(jobman):
    """`show` of a job lost while it waited spoke of its target tree and a log cap; list said no target was started.
    Both say the same now. Its doorbell goes with its supervisor."""
    jobman("group", "set", "paused", "--limit", "0", check=True)
    job = jobman.run("true", opts=["--group", "paused"])
    wait_for(lambda: jobman.state(job)["waiting_for"] == "slot", timeout=30)
    kill_all([jobman.state(job)["supervisor_pid"]])
    wait_for(lambda: jobman("reconcile", check=True) and jobman.state(job)["outcome"] == "lost", timeout=20)
    shown = jobman("show", job, check=True).stdout
    assert "lost:        the supervisor is gone; no target was started (jobman restart JOB submits it again)" in shown
    assert "target process tree" not in shown and "log size cap" not in shown
    listed = json.loads(jobman("list", "--json", check=True).stdout)[0]
    assert listed["wait_detail"] == "its supervisor is gone; no target was started"
    assert not (jobman.home / "bells" / f"{job}.fifo").exists()
