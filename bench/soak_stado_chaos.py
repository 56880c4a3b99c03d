"""The stado soak's agents and the faults it injects, each recorded in the FaultLog:

- two of the six agents run with a wall clock that is wrong (libfaketime, from the `libfaketime` wheel the test
  extra installs): one ahead of the store's by an hour on the local directory and by 10 minutes on SeaweedFS
  (S3 refuses a request signed more than 15 minutes off its clock), which refuses to fire schedules and judges
  everything else by the store's clock, and one 90 s behind; their jobs' processes get the true time;
- agent_kill: SIGKILL of a random running agent, and a new agent on the same host a moment later (0-3 s);
- agent_gone: SIGKILL of an agent that is never started again (as the OOM killer does to a host's only agent):
  first both agents of one host, then one of another, at most GONE_MAX, so that three agents on two hosts remain
  to drain the queue. Its host keeps its orphans: their keepers must stop them before the promise passes, and an
  agent of another host runs the job again;
- agent_stop: SIGSTOP of a random agent for 1 to 6 s (its promise is a poll, 0.25 s, plus what it measured;
  the reaper's margin is 2 s, its pass every second), then SIGCONT;
- cancel: `stado cancel` of a random accepted job, queued, running or already ended; a third of them aimed at a
  job that fails and retries (its cancel may land while the retry is being written);
- store_slow, store_stall, conn_drop (SeaweedFS only, through a proxy in front of it): the link throttled to
  50-300 KB/s, or stalled (no byte moves) for a moment; every open connection closed at once.
"""
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from soak_common import BIN, Chaos, ChaosUser, FaultLog, signal_quietly
from tests.stado.fakeclock import faked_clock
from tests.stado.throttle import ThrottledProxy

POLL, SETTLE, KILL_AFTER, SLOTS = 0.25, 1.0, 2.0, 2
# (host, index) -> libfaketime's FAKETIME offset, s, on the local directory and on S3 (signed within 15 minutes).
# Agents killed for good, at most: both of one host, then one of another (three agents remain, on two hosts).
GONE_MAX = 3
SKEWED = {"file": {("soak-c", 1): "+3600", ("soak-b", 1): "-90"}, "s3": {("soak-c", 1): "+600", ("soak-b", 1): "-90"}}



class ChaosProxy(ThrottledProxy):
    """The tests' throttling proxy, plus a way to drop every open connection (as a flaky network would)."""

    def drop(self) -> int:
        """Close every connection open now (both ends); returns how many connections were open."""
        open_now = list(self._sockets)
        dropped = 0
        for sock in open_now:
            try:
                sock.shutdown(socket.SHUT_RDWR)
                dropped += 1
            except OSError:
                pass
            sock.close()
        for sock in open_now:
            self._sockets.remove(sock)
        return dropped // 2

    def close(self) -> None:
        super().close()
        time.sleep(0.2)  # a connection accepted in the last instant is added after close(): close it too
        self.drop()


@dataclass
class AgentProc:
    host: str
    index: int
    incarnation: int
    proc: subprocess.Popen
    log: Path
    stopped: bool = False
    killed: bool = False
    noted: bool = False      # seen to have exited by itself
    gone: bool = False       # killed for good: never started again


@dataclass
class Fleet:
    """Six agents on three hosts (two per host, sharing the host's work root)."""
    directory: Path
    env: dict
    backend: str = "file"
    hosts: tuple = ("soak-a", "soak-b", "soak-c")
    per_host: int = 2
    agents: list = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    died: list = field(default_factory=list)     # (agent, exit code, when): agents that exited by themselves
    closing: threading.Event = field(default_factory=threading.Event)

    def start_all(self) -> None:
        for host in self.hosts:
            for i in range(self.per_host):
                self.start(host, i)
        threading.Thread(target=self._watch, daemon=True, name="fleet-watch").start()

    def _watch(self) -> None:
        """An agent that exits by itself is noted and started again, as a service manager would."""
        while not self.closing.wait(0.5):
            for a in list(self.agents):
                with self.lock:
                    if self.closing.is_set():
                        return
                    if a.killed or a.noted or a.proc.poll() is None:
                        continue
                    a.noted = True
                    self.died.append((a, a.proc.returncode, time.time()))
                self.start(a.host, a.index)

    def start(self, host: str, index: int) -> AgentProc:
        with self.lock:
            incarnation = sum(1 for a in self.agents if (a.host, a.index) == (host, index))
            log = self.directory / "agents" / f"{host}-{index}-{incarnation}.log"
            log.parent.mkdir(exist_ok=True)
            argv = [str(BIN / "stado"), "agent", "--slots", str(SLOTS), "--poll-seconds", str(POLL),
                    "--settle-seconds", str(SETTLE), "--kill-after", str(KILL_AFTER), "--host", host,
                    "--work-root", str(self.directory / f"work-{host}")]
            skewed = SKEWED[self.backend].get((host, index))
            env = dict(self.env, **faked_clock(skewed)) if skewed else self.env
            with open(log, "wb") as out:
                proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
            agent = AgentProc(host, index, incarnation, proc, log)
            self.agents.append(agent)
            return agent

    def live(self) -> list[AgentProc]:
        with self.lock:
            return [a for a in self.agents if a.proc.poll() is None and not a.stopped and not a.killed]

    def stop_all(self, timeout: float) -> list[str]:
        """SIGTERM every agent (they finish what runs, then exit 0); problems as lines."""
        problems = []
        with self.lock:
            self.closing.set()
        deadline = time.monotonic() + timeout
        for a in self.agents:
            if a.proc.poll() is None:
                signal_quietly(a.proc.pid, signal.SIGCONT)
                # Before its handlers are in place, SIGTERM ends any program: let a fresh agent start first.
                while "started on" not in a.log.read_text(errors="replace") and a.proc.poll() is None \
                        and time.monotonic() < deadline:
                    time.sleep(0.1)
                a.proc.send_signal(signal.SIGTERM)
        for a in self.agents:
            try:
                code = a.proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                a.proc.kill()
                a.proc.wait(10)
                problems.append(f"agent {a.log.name} did not exit within {timeout:.0f} s of SIGTERM")
                continue
            if not a.killed and code != 0 and not a.noted:
                problems.append(f"agent {a.log.name} exited {code} on SIGTERM")
        return problems


class StadoChaos(ChaosUser):
    def __init__(self, rng, fleet: Fleet, faults: FaultLog, mean_gap: float, cancel, proxy: ChaosProxy | None):
        self.rng, self.fleet, self.faults, self.proxy, self._cancel = rng, fleet, faults, proxy, cancel
        self._busy: set[str] = set()
        self.gone: list[AgentProc] = []
        actions = {"agent_kill": (2, self.agent_kill), "agent_stop": (2, self.agent_stop), "cancel": (3, self.cancel),
                   "agent_gone": (1, self.agent_gone)}
        if proxy is not None:
            actions.update(store_slow=(1, self.store_slow), store_stall=(1, self.store_stall),
                           conn_drop=(1, self.conn_drop))
        self.chaos = Chaos(rng, actions, mean_gap)

    def agent_kill(self):
        live = self.fleet.live()
        if len(live) < 2:
            return False  # keep at least one agent working
        victim = self.rng.choice(live)
        victim.killed = True
        t0 = time.time()
        victim.proc.kill()
        victim.proc.wait(30)
        delay = self.rng.uniform(0.0, 3.0)

        def restart():
            self.chaos.sleep(delay)
            new = self.fleet.start(victim.host, victim.index)
            self.faults.add("agent_kill", t0, time.time(), pid=victim.proc.pid,
                            detail=f"{victim.log.name}; restarted as {new.log.name} (pid {new.proc.pid})")

        self.chaos.lasting(restart)
        return True

    def agent_gone(self):
        """SIGKILL an agent and never start it again (see the module's docstring)."""
        if len(self.gone) >= GONE_MAX:
            return False
        live = self.fleet.live()
        gone_hosts = {a.host for a in self.gone}
        # Both agents of the first host hit, then one of another host: a host with no agent left keeps its
        # orphans, which only their keepers can stop.
        if self.gone and len(self.gone) < self.fleet.per_host:
            candidates = [a for a in live if a.host in gone_hosts]
        else:
            candidates = [a for a in live if a.host not in gone_hosts]
        if not candidates or len(live) < 4:
            return False
        victim = self.rng.choice(candidates)
        with self.fleet.lock:
            victim.killed = victim.gone = True
        t0 = time.time()
        victim.proc.kill()
        victim.proc.wait(30)
        self.gone.append(victim)
        self.faults.add("agent_gone", t0, time.time(), pid=victim.proc.pid,
                        detail=f"{victim.log.name}; not restarted ({victim.host} has "
                               f"{sum(1 for a in self.gone if a.host == victim.host)} of {self.fleet.per_host} gone)")
        return True

    def agent_stop(self):
        live = self.fleet.live()
        if len(live) < 2:
            return False
        victim = self.rng.choice(live)
        hold = self.rng.uniform(1.0, 6.0)
        victim.stopped = True
        t0 = time.time()
        signal_quietly(victim.proc.pid, signal.SIGSTOP)

        def resume():
            try:
                self.chaos.sleep(hold)
            finally:
                signal_quietly(victim.proc.pid, signal.SIGCONT)
                victim.stopped = False
                self.faults.add("agent_stop", t0, time.time(), pid=victim.proc.pid, detail=victim.log.name)

        self.chaos.lasting(resume)
        return True

    def cancel(self):
        return self._cancel()

    def store_slow(self):
        return self._lasting("store_slow", self._slow)

    def store_stall(self):
        return self._lasting("store_stall", self._stall)

    def _lasting(self, kind, fn):
        if kind in self._busy:
            return False
        self._busy.add(kind)
        self.chaos.lasting(fn)
        return True

    def _slow(self):
        rate = self.rng.uniform(50_000, 300_000)
        t0 = time.time()
        self.proxy.rate = rate
        try:
            self.chaos.sleep(self.rng.uniform(1.0, 4.0))
        finally:
            self.proxy.rate = None
            self._busy.discard("store_slow")
        self.faults.add("store_slow", t0, time.time(), detail=f"{rate / 1000:.0f} KB/s")

    def _stall(self):
        t0 = time.time()
        self.proxy.stall()
        try:
            self.chaos.sleep(self.rng.uniform(0.5, 3.0))
        finally:
            self.proxy.resume()
            self._busy.discard("store_stall")
        self.faults.add("store_stall", t0, time.time())

    def conn_drop(self):
        t = time.time()
        dropped = self.proxy.drop()
        self.faults.add("conn_drop", t, detail=f"{dropped} connection(s)")
        return True
