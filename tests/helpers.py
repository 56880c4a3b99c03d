"""Helpers shared by the test suites: bounded polling and process-table scans (no mocks)."""
import os
import signal
import threading
import time


def wait_for(predicate, timeout: float = 10.0, interval: float = 0.02, message: str = "condition"):
    """Poll `predicate` until it returns something truthy (returned), or fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}")
        time.sleep(interval)
        interval = min(interval * 1.5, 0.2)


def pids_with_env(name: str, value: str) -> list[int]:
    """Live processes whose environment has name=value (how tests find what they started)."""
    needle = f"{name}={value}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = f.read().split(b"\0")
            with open(f"/proc/{entry}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if needle in env and state not in (b"Z", b"X"):
            found.append(int(entry))
    return found


def pids_with_marker(marker: str) -> list[int]:
    """Live processes whose command line contains `marker`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
            with open(f"/proc/{entry}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in cmdline and state not in (b"Z", b"X"):
            found.append(int(entry))
    return found


def kill_all(pids) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGCONT)
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
        return state not in (b"Z", b"X")
    except OSError:
        return False


def run_for(agent, seconds: float) -> int:
    """Run an in-process agent (stado.agent.Agent, in this thread) until a SIGTERM `seconds` from now, as an
    operator's stop would end it; its exit code."""
    timer = threading.Timer(seconds, lambda: signal.raise_signal(signal.SIGTERM))
    timer.start()
    try:
        return agent.run()
    finally:
        timer.cancel()
