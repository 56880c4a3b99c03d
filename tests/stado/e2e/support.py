"""Running the real `stado` CLI and agents as subprocesses, and waiting with bounded polling."""
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.helpers import pids_with_env, wait_for  # noqa: F401  (shared with the jobman suites)

STADO = str(Path(sys.executable).with_name("stado"))
POLL = "0.1"  # agents poll this often in the tests (seconds)
MB = 1_000_000


def stado(env: dict, *args: str, ok: bool = True, timeout: float = 60, input: str | None = None):
    proc = subprocess.run([STADO, *args], env=env, capture_output=True, text=True, timeout=timeout, input=input)
    if ok and proc.returncode != 0:
        raise AssertionError(f"stado {' '.join(args)} exited {proc.returncode}: {proc.stderr.strip()}")
    return proc


def submit(env: dict, command: str, *flags: str) -> str:
    return stado(env, "submit", command, *flags).stdout.strip()


def machine_status(env: dict, job: str) -> dict:
    return json.loads(stado(env, "machine", "status", job).stdout)


def status_json(env: dict) -> dict:
    return json.loads(stado(env, "status", "--json", "--all").stdout)


class Agent:
    """A `stado agent` subprocess with its log in a file."""

    def __init__(self, env: dict, tmp: Path, *args: str, name: str = "agent", extra_env: dict | None = None,
                 host: str = "testhost"):
        self.log_path = tmp / f"{name}.log"
        self.work_root = tmp / "work"
        self._log = open(self.log_path, "wb")
        argv = [STADO, "agent", "--poll-seconds", POLL, "--work-root", str(self.work_root), "--host", host,
                "--kill-after", "2", *args]
        self.proc = subprocess.Popen(argv, env={**env, **(extra_env or {})}, stdin=subprocess.DEVNULL,
                                     stdout=self._log, stderr=subprocess.STDOUT)

    def wait(self, timeout: float = 60) -> int:
        try:
            return self.proc.wait(timeout)
        finally:
            self._log.close()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        if not self._log.closed:
            self._log.close()


def store_locks_held(pid: int, store) -> bool:
    """Whether process `pid` holds a flock on a lock file of the local-directory store `store` (from /proc/locks);
    False for any other store (it has no locks on this host)."""
    locks = getattr(store, "root", None) and os.path.join(store.root, "locks")
    if not locks or not os.path.isdir(locks):
        return False
    inodes = {os.stat(os.path.join(locks, name)).st_ino for name in os.listdir(locks)}
    with open("/proc/locks") as table:
        for line in table:
            words = line.split()
            if "FLOCK" in words and len(words) > words.index("FLOCK") + 4:
                at = words.index("FLOCK")
                holder, inode = words[at + 3], words[at + 4].rsplit(":", 1)[-1]
                if holder == str(pid) and inode.isdigit() and int(inode) in inodes:
                    return True
    return False


def stop_between_writes(proc: subprocess.Popen, store, tries: int = 500) -> None:
    """SIGSTOP an agent at a moment it holds none of the local store's bucket locks. A writer stopped inside one
    fails every other writer of that bucket after its lock wait (its job's keeper too): a fault of its own
    (tests/stado/test_file_locks.py), not the one a test that stops an agent to see its keeper speak is about."""
    import time

    for _ in range(tries):
        proc.send_signal(signal.SIGSTOP)
        if not store_locks_held(proc.pid, store):
            return
        proc.send_signal(signal.SIGCONT)
        time.sleep(0.01)
    raise AssertionError(f"agent {proc.pid} held a store lock at every one of {tries} stops")


def run_until_idle(env: dict, tmp: Path, *args: str, name: str = "agent", timeout: float = 60,
                   extra_env: dict | None = None, host: str = "testhost") -> Agent:
    agent = Agent(env, tmp, "--until-idle", *args, name=name, extra_env=extra_env, host=host)
    try:
        code = agent.wait(timeout)
    finally:
        agent.stop()
    agent.returncode = code
    return agent


def produce(env, tmp_path, store, size: int, name: str = "big.bin") -> tuple[str, str]:
    """(job id, SHA-256): a completed job (run straight against the store) that produced one artifact of `size`
    random bytes."""
    job = submit(env, f"head -c {size} /dev/urandom > {name} && $STADO_BIN artifact put {name}")
    agent = run_until_idle(env, tmp_path, name="producer")
    assert machine_status(env, job)["state"] == "completed", agent.log()
    [entry] = json.loads(store.get(f"status/{job}/manifest.json").data)["artifacts"]
    return job, entry["sha256"]


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True
