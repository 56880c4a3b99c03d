"""Process control and logs (Jobman part 4): trees stopped completely, identities verified before
any signal, output straight to capped per-attempt files, exit reporting, environment policy, prune."""
import json
import subprocess
import os
import signal
import shutil
import sqlite3
import tempfile
import time
import uuid
from pathlib import Path

from tests.helpers import alive, kill_all, pids_with_marker, wait_for
from tests.jobman.conftest import Jobman


def attempts(jobman, job_id):
    with jobman.db() as conn:
        conn.row_factory = sqlite3.Row
        return [dict(r) for r in conn.execute("SELECT * FROM attempts WHERE job_id = ? ORDER BY number", (job_id,))]


def target_of(jobman, job_id):
    return wait_for(lambda: (a := attempts(jobman, job_id)) and a[-1]["pid"] and a[-1], message="a target")


def proc_status(pid) -> dict:
    with open(f"/proc/{pid}/status") as f:
        return dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)


def marker() -> str:
    return f"jobman-test-{uuid.uuid4().hex[:12]}"


# A process that carries a marker in its argv, optionally ignores SIGTERM, and sleeps.
SLEEPER = "import signal, sys, time; sys.argv[2] == 'ignore' and signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"


def sleeper(tag: str, ignore_term: bool = False) -> str:
    return f"python3 -c \"{SLEEPER}\" {tag} {'ignore' if ignore_term else 'default'}"


def test_target_gets_its_own_session_and_default_signal_state(jobman, tmp_path):
    job_id = jobman.run("sleep", "30")
    target = target_of(jobman, job_id)
    pid = target["pid"]
    assert os.getsid(pid) == pid and os.getpgid(pid) == pid == target["pgid"]
    status = proc_status(pid)
    # The submitting CLI ignored SIGINT/SIGHUP/SIGTERM and Python ignores SIGPIPE and SIGXFSZ: none of
    # that leaks. (Signals 32 and 33 belong to the C library; a test runner may have them ignored.)
    standard = (1 << 31) - 1
    assert int(status["SigIgn"], 16) & standard == 0 and int(status["SigBlk"], 16) & standard == 0
    assert target["start_time"] > 0 and target["boot_id"]
    jobman("cancel", job_id, check=True)


def test_timeout_leaves_no_process_of_the_tree_alive(jobman, tmp_path):
    tag = marker()
    # The grandchild starts its own session and ignores SIGTERM; the child double-forks it away.
    script = (f"setsid {sleeper(tag, True)} & "
              f"( {sleeper(tag + '-2', True)} & ) ; sleep 60")
    job_id = jobman.run("sh", "-c", script, opts=["--timeout", "1s", "--kill-after", "0.5s"])
    wait_for(lambda: len(pids_with_marker(tag)) == 2, message="the grandchildren to start")
    assert jobman("wait", job_id).returncode == 124
    assert pids_with_marker(tag) == []
    assert jobman.state(job_id)["outcome"] == "timed_out"


def test_processes_left_behind_by_a_finished_job_are_stopped(jobman):
    tag = marker()
    job_id = jobman.run("sh", "-c", f"(setsid {sleeper(tag)} &); echo started")
    assert jobman("wait", job_id).returncode == 0
    assert pids_with_marker(tag) == []


def test_cancel_stops_the_whole_tree(jobman):
    tag = marker()
    job_id = jobman.run("sh", "-c", f"setsid {sleeper(tag)} & sleep 60", opts=["--kill-after", "1s"])
    wait_for(lambda: pids_with_marker(tag), message="the grandchild")
    result = jobman("cancel", job_id, check=True)
    assert "cancelled" in result.stdout
    assert pids_with_marker(tag) == []
    assert jobman("wait", job_id).returncode == 125


def _lose(jobman, job_id):
    """Kill the supervisor and let reconciliation call the job lost."""
    kill_all([jobman.state(job_id)["supervisor_pid"]])
    wait_for(lambda: jobman("reconcile") and jobman.state(job_id)["outcome"] == "lost", timeout=10)


def test_cancel_of_a_lost_job_stops_its_tree_only_if_it_verifies(jobman):
    tag = marker()
    job_id = jobman.run("sh", "-c", f"exec {sleeper(tag)}")
    pid = target_of(jobman, job_id)["pid"]
    _lose(jobman, job_id)
    shown = jobman.show(job_id)
    assert shown["outcome"] == "lost" and shown["target_alive"] is True
    result = jobman("cancel", job_id, check=True)
    assert "has been stopped" in result.stdout and "stays lost" in result.stdout
    assert not alive(pid)
    assert jobman.state(job_id)["outcome"] == "lost"
    assert "lost_target_stopped" in [e["kind"] for e in jobman.show(job_id)["events"]]


def test_a_lost_job_is_alive_while_a_daemonised_child_of_its_target_lives(jobman, tmp_path):
    """The root exits after the supervisor is gone, but a double-forked child (same session, parent init)
    goes on: the job keeps its slot, shows its tree alive, and cancel stops that child."""
    jobman("group", "set", "solo", "--limit", "1", check=True)
    tag, flag = marker(), tmp_path / "flag"
    job_id = jobman.run("sh", "-c", f"({sleeper(tag)} &); while [ ! -e {flag} ]; do sleep 0.05; done",
                        opts=["--group", "solo"])
    root = target_of(jobman, job_id)["pid"]
    wait_for(lambda: pids_with_marker(tag), message="the daemonised child")
    _lose(jobman, job_id)
    flag.touch()
    wait_for(lambda: not alive(root), message="the root to exit")
    nxt = jobman.run("true", opts=["--group", "solo"])
    wait_for(lambda: jobman.state(nxt)["waiting_for"] == "slot", message="the next job to wait for the slot")
    jobman("reconcile", check=True)
    assert jobman.show(job_id)["target_alive"] is True and jobman.state(job_id)["slot_held"] == 1
    assert jobman.state(nxt)["phase"] == "waiting"
    result = jobman("cancel", job_id, check=True)
    assert "has been stopped" in result.stdout
    assert not pids_with_marker(tag)
    assert jobman.show(job_id)["target_alive"] is False
    assert jobman("wait", nxt, "--timeout", "20s").returncode == 0


def test_forged_target_identity_is_never_signalled(jobman):
    """PID reuse: the recorded start time no longer matches the process with that pid, and that process
    does not carry the job's id in its environment either (another program merely has the number)."""
    tag = marker()
    job_id = jobman.run("sh", "-c", f"exec env -u JOBMAN_JOB_ID {sleeper(tag)}")
    target = target_of(jobman, job_id)
    _lose(jobman, job_id)
    with jobman.db() as conn:
        conn.execute("UPDATE attempts SET start_time = start_time + 1 WHERE job_id = ?", (job_id,))
    result = jobman("cancel", job_id, check=True)
    assert "no longer exists or that pid is now another process" in result.stdout
    assert "nothing was signalled" in result.stdout
    assert alive(target["pid"])  # the process that merely has that pid was left alone
    assert jobman.show(job_id)["target_alive"] is False
    kill_all([target["pid"]])


def _capped_job(jobman):
    """50 MB of numbered lines through a 1 MB cap: the log stays within it, keeps the newest lines with no
    gap, and `jobman logs` marks exactly the dropped span."""
    code = ("import sys\n"
            "w = sys.stdout.write\n"
            "for i in range(500_000): w(f'{i:09d} ' + 'x' * 90 + '\\n')\n"
            "w('THE END\\n')\n")
    job_id = jobman.run("python", "-c", code, opts=["--log-limit", "1MB"])
    assert jobman("wait", job_id).returncode == 0
    log = attempts(jobman, job_id)[0]["log_path"]
    assert os.stat(log).st_blocks * 512 <= 1024 * 1024 + 64 * 1024  # the space it uses
    assert os.stat(log).st_mode & 0o777 == os.stat(log + ".cut").st_mode & 0o777 == 0o600  # private, both
    shown = jobman.show(job_id)
    dropped = [e for e in shown["events"] if e["kind"] == "log_truncated"]
    assert dropped and dropped[0]["bytes_dropped"] >= 49_000_000
    out = jobman("logs", job_id, check=True).stdout
    marker, rest = out.split("\n", 1)
    # The marker counts what the cap cut plus the rest of the line the cut fell in: what follows it is
    # whole lines.
    shown_dropped = int(marker.removeprefix("[jobman: ").split()[0])
    assert marker == f"[jobman: {shown_dropped} bytes of earlier output were dropped by the log size limit]"
    assert 0 <= shown_dropped - dropped[0]["bytes_dropped"] < 101
    assert shown_dropped + len(rest) == 500_000 * 101 + len("THE END\n")  # nothing else lost
    assert 0.9 * 1024 * 1024 <= len(rest) <= 1024 * 1024 and rest.endswith("000499999 " + "x" * 90 + "\nTHE END\n")
    numbers = [int(line[:9]) for line in rest.split("\n")[:-2]]
    assert numbers == list(range(numbers[0], 500_000))


def test_log_limit_keeps_the_newest_output_within_the_cap(jobman):
    _capped_job(jobman)  # ext4 here: the cap collapses the file's front


def test_log_limit_on_tmpfs_punches_the_front_out(tmp_path):
    """tmpfs cannot collapse a range: the cap frees the front in place instead, losing nothing."""
    assert os.path.isdir("/dev/shm"), "this test needs a tmpfs at /dev/shm"
    home = tempfile.mkdtemp(dir="/dev/shm", prefix="jobman-test-")
    jobman = Jobman(Path(home) / "home")
    try:
        _capped_job(jobman)
    finally:
        kill_all(jobman.processes())
        shutil.rmtree(home)


def test_target_outlives_a_killed_supervisor(jobman, tmp_path):
    flag = tmp_path / "flag"
    done = tmp_path / "done"
    writer = tmp_path / "writer.sh"
    # Writes continuously (any failed write exits 3); after the supervisor is gone it keeps writing for
    # 5 s, then exits 0. Its parent, the target's root, records that exit status.
    writer.write_text(f"i=0; while [ ! -e {flag} ]; do echo tick $i || exit 3; i=$((i+1)); sleep 0.01; done\n"
                      f"end=$(( $(date +%s) + 5 ))\n"
                      f"while [ $(date +%s) -lt $end ]; do echo after $i || exit 3; i=$((i+1)); sleep 0.01; done\n"
                      f"echo clean exit\n")
    script = f"sh {writer}; echo $? > {done}.tmp; mv {done}.tmp {done}"
    job_id = jobman.run("sh", "-c", script)
    target = target_of(jobman, job_id)
    assert int(proc_status(target["pid"])["SigIgn"], 16) & (1 << (signal.SIGPIPE - 1)) == 0
    log = target["log_path"]
    wait_for(lambda: os.path.getsize(log) > 100)
    _lose(jobman, job_id)
    flag.touch()
    shown = jobman.show(job_id)
    assert shown["target_alive"] is True and "cap no longer holds" in shown["lost_note"]
    wait_for(done.exists, timeout=20, message="the target to finish its 5 s of writing")
    assert done.read_text() == "0\n"
    with open(log) as f:
        text = f.read()
    assert "after" in text and text.endswith("clean exit\n")
    # Its slot is released once the tree is gone.
    wait_for(lambda: jobman("reconcile") and jobman.state(job_id)["slot_held"] == 0, timeout=10)


def test_logs_follow_across_a_retry(jobman, tmp_path):
    counter = tmp_path / "n"
    script = (f"n=$(cat {counter} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {counter}; "
              f"echo attempt $n output; sleep 0.3; [ $n -ge 2 ] && exit 5 || exit 1")
    job_id = jobman.run("sh", "-c", script, opts=["--retries", "1", "--retry-delay", "0.3s"])
    result = jobman("logs", "--follow", job_id)
    assert result.returncode == 5
    assert "attempt 1 output" in result.stdout and "attempt 2 output" in result.stdout
    assert result.stdout.index("==> attempt 1 <==") < result.stdout.index("==> attempt 2 <==")
    assert jobman("logs", job_id, "--attempt", "2", check=True).stdout == "attempt 2 output\n"


def test_separate_stderr(jobman):
    job_id = jobman.run("sh", "-c", "echo to-out; echo to-err >&2", opts=["--separate-stderr"])
    jobman("wait", job_id, check=True)
    assert jobman("logs", job_id, check=True).stdout == "to-out\n"
    assert jobman("logs", job_id, "--stderr", check=True).stdout == "to-err\n"


def test_environment_policies(jobman, tmp_path):
    env = {"VISIBLE": "yes", "HIDDEN": "no", "DB_PASSWORD": "s3cret"}
    clean = jobman("run", "--print-id", "--env-policy", "clean", "--env", "ONLY=1", "--", "/usr/bin/env", env=env,
                   check=True).stdout.strip()
    allow = jobman("run", "--print-id", "--env-policy", "allow:VISIBLE,DB_PASSWORD", "--", "/usr/bin/env", env=env,
                   check=True).stdout.strip()
    inherit = jobman("run", "--print-id", "--", "/usr/bin/env", env=env, check=True).stdout.strip()
    jobman("wait", clean, allow, inherit, check=True)

    def seen(job_id):
        return dict(line.split("=", 1) for line in jobman("logs", job_id, check=True).stdout.splitlines())

    assert seen(clean) == {"ONLY": "1", "JOBMAN_JOB_ID": clean, "JOBMAN_ATTEMPT": "1"}
    assert seen(allow) == {"VISIBLE": "yes", "DB_PASSWORD": "s3cret", "JOBMAN_JOB_ID": allow, "JOBMAN_ATTEMPT": "1"}
    got = seen(inherit)
    assert got["HIDDEN"] == "no" and got["JOBMAN_JOB_ID"] == inherit
    shown = jobman.show(allow)
    assert shown["spec"]["env"] == {"VISIBLE": "yes", "DB_PASSWORD": "****"}
    assert "s3cret" not in jobman("show", allow, check=True).stdout


def test_exit_reporting(jobman):
    killed = jobman.run("sh", "-c", "kill -KILL $$")
    assert jobman("wait", killed).returncode == 128 + 9
    shown = jobman.show(killed)
    assert shown["signal"] == "SIGKILL" and shown["exit_code"] is None
    assert shown["attempts_detail"][0]["duration"] is not None
    assert "signal SIGKILL" in jobman("show", killed, check=True).stdout


def test_prune_removes_finished_jobs_only(jobman, tmp_path):
    gate = tmp_path / "gate"
    done = jobman.run("true")
    waiting_on = jobman.run("true", opts=["--name", "base"])
    running = jobman.run("sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.05; done")
    dependent = jobman.run("true", opts=["--after-success", running])
    jobman("wait", done, waiting_on, check=True)
    log_dir = jobman.home / "logs" / done
    assert log_dir.exists()
    assert json.loads(jobman("prune", "--older-than", "1h", "--json", check=True).stdout) == []
    removed = json.loads(jobman("prune", "--json", check=True).stdout)
    assert set(removed) == {done, waiting_on}
    assert not log_dir.exists()
    assert jobman.state(running)["phase"] != "finished" and jobman.state(dependent) is not None
    gate.touch()
    jobman("wait", running, dependent, check=True)
    assert set(json.loads(jobman("prune", "--json", check=True).stdout)) == {running, dependent}
    assert jobman.count_jobs() == 0


def test_long_output_is_not_slowed_by_the_supervisor(jobman, tmp_path):
    """The target writes straight into the file: a stopped supervisor does not block it."""
    gate = tmp_path / "gate"
    job_id = jobman.run("sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.02; done; "
                                    "head -c 20000000 /dev/zero | tr '\\0' 'a'; echo")
    target = target_of(jobman, job_id)
    sup = jobman.state(job_id)["supervisor_pid"]
    os.kill(sup, signal.SIGSTOP)
    try:
        gate.touch()
        wait_for(lambda: not alive(target["pid"]), timeout=30,
                 message="the target to finish while its supervisor is stopped")
        assert os.path.getsize(target["log_path"]) == 20_000_001
    finally:
        os.kill(sup, signal.SIGCONT)
    assert jobman("wait", job_id).returncode == 0


def test_spawn_window_a_target_started_but_never_recorded_keeps_its_slot(jobman, tmp_path):
    """The supervisor is killed right after its target starts and before the target is recorded (a fault
    point). The target and the daemon it starts in a session of its own carry the job's id in their
    environment: the slot stays held while they live, show names them, cancel stops them, and only
    then does the next job of the group run."""
    jobman("group", "set", "solo", "--limit", "1", check=True)
    root_tag, daemon_tag = marker(), marker()
    script = f"setsid -f {sleeper(daemon_tag)}; exec {sleeper(root_tag)}"
    job_id = jobman.run("sh", "-c", script, opts=["--group", "solo"],
                        env={"JOBMAN_TEST_FAULT": "supervisor:before_record"})
    # Until the shell has exec'd, its own command line names both tags: wait for one process each.
    wait_for(lambda: len(pids_with_marker(root_tag)) == 1 and len(pids_with_marker(daemon_tag)) == 1
             and not set(pids_with_marker(root_tag)) & set(pids_with_marker(daemon_tag)),
             message="the target and its daemon")
    (root,), (daemon,) = pids_with_marker(root_tag), pids_with_marker(daemon_tag)
    assert os.getsid(daemon) != os.getsid(root)  # out of the target's session and process group
    wait_for(lambda: jobman("reconcile") and jobman.state(job_id)["outcome"] == "lost", timeout=10)
    assert attempts(jobman, job_id)[0]["pid"] is None  # never recorded
    nxt = jobman.run("true", opts=["--group", "solo"])
    wait_for(lambda: jobman.state(nxt)["waiting_for"] == "slot")
    time.sleep(1.5)  # more than a lease, several polls: the group stays honestly full
    jobman("reconcile", check=True)
    assert jobman.state(job_id)["slot_held"] == 1 and jobman.state(nxt)["phase"] == "waiting"
    shown = jobman.show(job_id)
    assert shown["target_alive"] is True
    assert {p["pid"] for p in shown["target_processes"]} == {root, daemon}
    assert root_tag in jobman("show", job_id, check=True).stdout
    result = jobman("cancel", job_id, check=True)
    assert "has been stopped" in result.stdout
    assert not alive(root) and not alive(daemon)
    assert jobman("wait", nxt, "--timeout", "20s").returncode == 0
    assert jobman.state(job_id)["outcome"] == "lost" and jobman.state(job_id)["slot_held"] == 0


def test_a_supervisor_killed_before_its_target_started_frees_the_slot(jobman):
    """The window before: the slot is taken but nothing was started, so nothing carries the job's id and
    the slot is released once the job is found lost."""
    jobman("group", "set", "solo", "--limit", "1", check=True)
    job_id = jobman.run("sleep", "30", opts=["--group", "solo"], env={"JOBMAN_TEST_FAULT": "supervisor:before_spawn"})
    nxt = jobman.run("true", opts=["--group", "solo"])
    assert jobman("wait", nxt, "--timeout", "30s").returncode == 0
    assert jobman.state(job_id)["outcome"] == "lost" and jobman.state(job_id)["slot_held"] == 0
    assert jobman.show(job_id)["target_processes"] == []


def _fd_targets(pid: int) -> dict[int, str]:
    found = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            found[int(fd)] = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            pass  # closed meanwhile
    return found


def test_no_descriptor_of_the_submitter_reaches_the_supervisor_or_the_target(jobman, tmp_path):
    # A descriptor the submitting shell left open (here fd 7, a copy of the pipe into `cat`)
    # used to stay open in the supervisor and the target, so the pipeline waited for the job to end.
    script = f"(exec 7>&1; {shutil.which('jobman', path=jobman.env['PATH'])} run --print-id -- sleep 30) | cat"
    started = time.monotonic()
    result = subprocess.run(["/bin/sh", "-c", script], env=jobman.env, capture_output=True, text=True, timeout=40)
    took = time.monotonic() - started
    job_id = result.stdout.strip()
    assert result.returncode == 0 and len(job_id) == 36, result
    assert took < 1.5, f"the pipeline took {took:.1f}s: something of the job holds it open"
    # And a pipe handed to `jobman run` as fd 7 reaches neither process: the supervisor keeps its log, the
    # database and its doorbell; the target exactly stdin from /dev/null and stdout/stderr to its log.
    read_end, write_end = os.pipe()
    try:
        submitted = subprocess.run([shutil.which("jobman", path=jobman.env["PATH"]), "run", "--print-id", "--", "sleep", "30"],
                                   env=jobman.env, capture_output=True, text=True, timeout=40,
                                   pass_fds=(write_end,), preexec_fn=lambda: os.dup2(write_end, 7) and None)
        job_id = submitted.stdout.strip()
        assert submitted.returncode == 0, submitted.stderr
        pipe = os.readlink(f"/proc/self/fd/{write_end}")
        target = target_of(jobman, job_id)
        supervisor = jobman.state(job_id)["supervisor_pid"]
        home = str(jobman.home)
        allowed = ("/dev/null", f"{home}/jobman.db", f"{home}/jobman.db-wal", f"{home}/jobman.db-shm",
                   f"{home}/bells/{job_id}.fifo")
        held = _fd_targets(supervisor)
        assert pipe not in held.values()
        # (the job's own logs: its supervisor's, and the attempt's, which the log cap watches; a pidfd)
        strays = [t for t in held.values() if t not in allowed and not t.startswith(f"{home}/logs/{job_id}/")
                  and t != "anon_inode:[pidfd]"]
        assert not strays, held
        log = target["log_path"]
        assert _fd_targets(target["pid"]) == {0: "/dev/null", 1: log, 2: log}
    finally:
        os.close(read_end)
        os.close(write_end)
