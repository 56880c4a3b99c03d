"""The keeper of one running job: a small process beside the job's shell that outlives the agent that started both.

A running job is alive while its agent's promise holds; once the promise has passed, a reaper anywhere in the fleet
may requeue it, and another host starts it again. If the agent was killed for good (the OOM killer), stopped
(SIGSTOP, a host swapping) or cut off from the store, nothing on this host spoke for the job: its process ran on
beside the next attempt. The keeper is what speaks for it here. It watches the promise its agent keeps
(`promise.json` in the job's directory, rewritten by the agent after every renewal, on CLOCK_BOOTTIME), and:

- when the promise runs out with no renewal after it (and none in flight that the store shows landed), it stops the
  job's processes before any reaper may judge the promise passed: SIGTERM a quarter of the reaper's margin after
  the promise (by half the margin when it asks the store whether a renewal in flight landed), SIGKILL by three
  quarters (or --kill-after after SIGTERM, if sooner). It writes `kept.json` first,
  so whoever records the attempt (its agent come back, the agent that next starts on this host, the keeper itself)
  records a lost worker, not the signal; then, if no agent has spoken meanwhile, it records that verdict in the
  store itself (requeued with the reason, within the requeue budget);
- when the job's shell ends (it holds a pidfd on it, so it learns the exit status whoever reaps the shell), it
  writes the status into the job's directory at once; and if the promise then runs out before any agent recorded
  the outcome, it records it itself, as an agent taking the job over would (stado.agent.standin);
- a new agent that takes the job over (the restart check) rewrites the promise as its own: the keeper follows it.

It exits when its agent says the slot is done (a line on its stdin, or `done` in the promise), or once it has
recorded what it had to. It imports only what watching needs; the store client is loaded only to check a renewal in
flight or to record a verdict.

    python -m stado.agent.keeper < spec      (started by the agent: agent.processhost.ProcessHost.keep)
"""
import os
import select
import sys
import time

TERM_AT, KILL_AT = 0.25, 0.75  # fractions of the reaper's margin past the promise
# A renewal in flight is asked about until this fraction at most, so that a slow answer still leaves SIGTERM a
# quarter of the margin before SIGKILL.
ASK_UNTIL = 0.5
EXIT_CHECK = 1.0  # without a pidfd (an old kernel), how often the shell is looked at


def boottime() -> float:
    return time.clock_gettime(time.CLOCK_BOOTTIME)


class Keeper:
    def __init__(self, spec: dict, control: int):
        self.spec = spec
        self.job_id, self.job_dir, self.claim = spec["job_id"], spec["job_dir"], spec["attempt"]
        self.process = spec["process"]
        self.margin = float(spec.get("margin", 2.0))
        self.kill_after = float(spec.get("kill_after", 10.0))
        self.control: int | None = control  # its agent's pipe: a line says done, its end that the agent is gone
        self._host = None  # loaded when the job's processes are to be stopped (signal and enum cost its start 5 ms)
        self.ended: tuple | None = None   # the shell's (exit code, signal), once it has ended
        self.proven: float = 0.0          # until when a renewal the store showed landed keeps the job alive
        self.agent_id = spec.get("agent_id")
        self.poll = float((spec.get("agent") or {}).get("poll_seconds", 5.0))
        self.bridge_for = float(spec.get("bridge", 0.0))  # how long it renews for a gone agent
        self.gone_at: float | None = None  # when its agent's pipe closed
        self.version = None                # the record's version its own bridge renewals left
        self.landed: list | None = None    # the version of its agent's renewal in flight that the store showed landed
        self.bridged: list[str] = []       # the nonces of its bridge's renewals (an answer lost, one may hold it)
        self.checked: str | None = None   # the nonce of the renewal in flight already asked of the store
        self.pidfd = self._pin()

    @property
    def host(self):
        if self._host is None:
            from stado.agent.processhost import ProcessHost

            self._host = ProcessHost()
        return self._host

    def log(self, message: str) -> None:
        sys.stderr.write(f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} keeper of {self.job_id}: {message}\n")
        sys.stderr.flush()

    def _pin(self) -> int | None:
        """A pidfd on the job's shell: the one its agent opened as it spawned it (fd 3), else one opened here (a shell
        that ended before this process began is then told by its agent's exit-status file alone)."""
        from runkit.system import exits

        given = self.spec.get("pidfd")
        if isinstance(given, int):
            return given
        start = self.process.get("start_time")
        return None if start is None else exits.exit_watch(self.process["pid"], start)

    # -- the loop ------------------------------------------------------------------------------------------

    def run(self) -> int:
        from stado.agent.hostfiles import PROMISE_FILE, read_json_file

        while True:
            promise = read_json_file(self.job_dir, PROMISE_FILE)
            self._look_at_shell()
            checkpoint = (read_json_file(self.job_dir, "checkpointed.json") or {}).get("began")
            now = boottime()
            bridging = (self.gone_at is not None and now < self.gone_at + self.bridge_for and promise is not None
                        and promise.get("owner") == self.agent_id)
            step = decide(promise, claim=self.claim, now=now, ended=self.ended is not None, proven=self.proven,
                          checked=self.checked, margin=self.margin, checkpoint=checkpoint, bridging=bridging,
                          poll=self.poll)
            if step[0] == "leave":
                return 0
            if step[0] == "wait":
                self._wait(step[1])
            elif step[0] == "bridge":
                self._bridge()
            elif step[0] == "record":
                if (said := self._record_ended(promise or {})) is not None:
                    return said
            elif step[0] == "check":
                _, nonce, alive_until, deadline = step
                self.checked = nonce
                if (landed := self._renewal_landed(nonce, deadline)) is not None:
                    self.proven, self.landed = alive_until, landed
            elif (said := self._stop(promise or {}, step[1])) is not None:
                return said

    def _store_now(self) -> float:
        """The store's time, from where its agent last measured it (`store` in the promise, against CLOCK_BOOTTIME):
        the renewals and verdicts it writes carry the store's time as its agent's do, on a host whose wall clock
        is off. This host's wall clock if its agent had not measured it yet."""
        from stado.agent.hostfiles import PROMISE_FILE, read_json_file

        return store_time(read_json_file(self.job_dir, PROMISE_FILE), boottime(), time.time())

    def _wait(self, seconds: float) -> None:
        """Until `seconds` pass, the shell ends, or the agent writes to (or leaves) the control pipe."""
        pidfd = self.pidfd if self.ended is None else None  # an ended shell's pidfd stays readable
        watched = [fd for fd in (self.control, pidfd) if fd is not None]
        timeout = max(0.0, seconds) if pidfd is not None or self.ended is not None else \
            min(max(0.0, seconds), EXIT_CHECK)
        ready, _, _ = select.select(watched, [], [], timeout)
        if self.control is not None and self.control in ready:
            line = os.read(self.control, 64)
            if line.startswith(b"done"):
                raise SystemExit(0)
            if not line:  # its agent is gone: the keeper speaks for the job now
                self.gone_at = boottime()
                self.log(f"its agent is gone; renewing its claim for up to {self.bridge_for:g} s, for the agent that "
                         "next starts on this host to take the job over")
                os.close(self.control)
                self.control = None

    def _bridge(self) -> None:
        """Renew the claim for the gone agent (standin.bridge). A record no longer that agent's (taken over by the
        agent that started next, cancelled, reaped), or a store that does not answer, ends the bridge: from then on
        the promise as it stands decides."""
        began = boottime()
        try:
            from stado.agent.standin import bridge

            got = bridge(self.job_id, self.claim, str(self.agent_id), self.poll + 1.0, now=self._store_now,
                         nonces=self.bridged)
        except Exception as e:
            got = None
            self.log(f"could not renew for its agent ({type(e).__name__}: {brief(str(e), 160)})")
        if got is None:
            self.gone_at = -1e18  # the bridge is over
            return
        self.version = got
        self.proven = began + self.poll + 1.0

    def _look_at_shell(self) -> None:
        if self.ended is not None:
            return
        from runkit.system import exits, proc

        pid, start = self.process["pid"], self.process.get("start_time")
        status = None
        if self.pidfd is not None:
            status = exits.exit_status_of(self.pidfd, pid, start)
            if status is None and proc.verify(pid, start, self.process.get("boot_id")):
                return
        elif proc.verify(pid, start, self.process.get("boot_id")):
            return
        self.ended = proc.describe_status(status) if status is not None else (None, None)
        if status is not None:
            self._write_exit_status()

    def _write_exit_status(self) -> None:
        from stado.agent.hostfiles import EXIT_STATUS_FILE, write_exit_status

        path = os.path.join(self.job_dir, EXIT_STATUS_FILE)
        if not os.path.exists(path):
            try:
                write_exit_status(path, *(self.ended or (None, None)))  # the kernel's, as the agent writes it
            except OSError:
                pass

    # -- a renewal in flight ---------------------------------------------------------------------------------

    def _renewal_landed(self, nonce: str, deadline: float) -> list | None:
        """The record's version if the store holds the renewal with this nonce, asked by `deadline` (a store that
        cannot say in time proves nothing: None)."""
        try:
            return _store_has(self.job_id, nonce, timeout=max(0.1, deadline - boottime()))
        except Exception as e:
            self.log(f"could not ask the store whether its agent's renewal landed ({type(e).__name__}: "
                     f"{brief(str(e), 160)})")
            return None

    # -- stopping the job --------------------------------------------------------------------------------------

    def _stop(self, promise: dict, kill: float) -> int | None:
        from stado.agent.hostfiles import write_kept

        self._look_at_shell()
        if self.ended is not None:  # it ended on its own just now: its outcome is recorded, not a lost worker's
            return self._record_ended(promise)  # None, taken over meanwhile: the loop follows the new owner

        why = ("its agent did not renew its promise in time (stopped, dead or cut off from the store); its keeper "
               "on this host stopped its processes before the promise passed")
        write_kept(self.job_dir, {"at": time.time(), "why": why, "attempt": self.claim, "pid": self.process["pid"]})
        self.log(f"{why}: SIGTERM to process group {self.process.get('pgid')}")
        self.host.signal(self.process, 15)
        deadline = min(boottime() + self.kill_after, kill)
        while boottime() < deadline and self.host.alive(self.process):
            time.sleep(0.02)
        if self.host.alive(self.process):
            self.log("SIGKILL: it outlived SIGTERM")
            self.host.signal(self.process, 9)
        gone_by = boottime() + 5.0
        while self.host.alive(self.process) and boottime() < gone_by:
            time.sleep(0.02)
        self._look_at_shell()
        return self._record_lapse(promise, why)

    def _record_lapse(self, promise: dict, why: str) -> int:
        """Nobody spoke for the job: unless its agent (come back) or a successor writes first, requeue it (within
        the requeue budget) with the keeper's reason, as the reaper would have, a lease sooner."""
        try:
            from stado.agent.standin import lapse_kept

            versions, nonces = own_writes(promise, self.landed, self.version)
            said = lapse_kept(self.job_id, self.claim, versions, why, nonces=nonces + self.bridged[-8:],
                              now=self._store_now)
        except Exception as e:  # the store cannot be written: the reaper settles the job by its promise
            said = f"could not record it ({type(e).__name__}: {brief(str(e), 160)}); the reaper settles it by its promise"
        self.log(said)
        return 0

    def _record_ended(self, promise: dict) -> int | None:
        """The shell ended and its agent did not record the outcome before its promise ran out: this keeper takes
        the job over as the agent next starting on this host would, uploads what the job left and records it.
        None when another agent of this host took the job over first: the keeper follows that agent's promise (it
        may die before it records the outcome) and the loop goes on."""
        self.log(f"its command ended ({_words(self.ended)}) and its agent has not recorded it within its promise: "
                 "recording it here")
        held = None
        try:
            from stado.agent.standin import record_ended

            said, held = record_ended(self.spec, self.ended or (None, None), promise)
        except Exception as e:
            said = f"could not record it ({type(e).__name__}: {brief(str(e), 160)}); the reaper settles it by its promise"
        self.log(said)
        if held is None:
            return 0
        now = boottime()
        self.proven = max(self.proven, held - (store_time(promise, now, time.time()) - now))
        return None


def decide(promise: dict | None, *, claim: str, now: float, ended: bool, proven: float, checked: str | None,
           margin: float, checkpoint: float | None = None, bridging: bool = False, poll: float = 5.0) -> tuple:
    """The keeper's next step (pure; every time on CLOCK_BOOTTIME). `bridging`: its agent is gone (its pipe closed),
    no agent has taken the job over, and the bridge's time is not up: the keeper renews the claim itself, half a
    `poll` before its promise runs out, so that the agent that next starts on the host can take the job over.

    ("leave",)                             the slot is settled (done), its directory gone, or another attempt's
    ("bridge",)                            renew the claim for the gone agent (standin.bridge)
    ("wait", seconds)                      nothing to do before then
    ("record",)                            the shell ended and its agent has not recorded it within its promise (and
                                           the same part of the margin past it that a running one is stopped at)
    ("check", nonce, until, deadline)      past the promise with a renewal in flight: ask the store, by `deadline`
                                           (half the margin past the promise, so that SIGTERM keeps time before
                                           SIGKILL), whether it landed (then the job is alive until `until`)
    ("stop", kill_deadline)                nothing proves the job alive: stop its processes, SIGKILL by the deadline
    """
    if promise is None or promise.get("done") or promise.get("attempt") != claim:
        return ("leave",)
    until = max(alive_until(promise, checkpoint), proven)
    if bridging and not ended:
        renew_at = until - poll / 2
        return ("bridge",) if now >= renew_at else ("wait", renew_at - now)
    term, kill = until + TERM_AT * margin, until + KILL_AT * margin
    if now < term:
        # Never longer than a poll: the agent rewrites the promise after each renewal, and one that landed after a
        # pulse's evidence window was read makes that window moot (the reaper judges by the later promise).
        return ("wait", min(term - now, poll))
    trying = promise.get("trying") or {}
    nonce, began, lease = trying.get("nonce"), trying.get("began"), trying.get("lease")
    if (nonce and nonce != checked and isinstance(began, (int, float)) and isinstance(lease, (int, float))
            and began + lease > until):
        return ("check", nonce, began + lease, until + ASK_UNTIL * margin)
    return ("record",) if ended else ("stop", kill)


def own_writes(promise: dict | None, landed=None, bridged=None) -> tuple[list, list]:
    """(versions, nonces) this attempt's own writes are known to have left: the version its agent last told, the one
    its renewal in flight is written on (its own write, maybe one whose answer was lost), that renewal's once the
    store showed it landed (`landed`), the bridge's last (`bridged`); the nonces of the renewal in flight and of
    those answered with an error since the last that landed. A record at one of them was moved by nobody else."""
    promise = promise or {}
    found, listed = promise.get("trying"), promise.get("unanswered")
    trying: dict = found if isinstance(found, dict) else {}
    unanswered: list = listed if isinstance(listed, list) else []
    versions = [v for v in (promise.get("version"), trying.get("base"), landed, bridged) if isinstance(v, list)]
    return versions, [n for n in (trying.get("nonce"), *unanswered) if isinstance(n, str)]


def store_time(promise: dict | None, boot: float, wall: float) -> float:
    """The store's time, by the offset its agent measured (`store` in the promise: the bounds of the store's time
    less CLOCK_BOOTTIME) at `boot` on that clock; `wall`, this host's wall clock, when there is none."""
    bounds = store_bounds(promise)
    return wall if bounds is None else (bounds[0] + bounds[1]) / 2 + boot


def store_bounds(promise: dict | None) -> tuple[float, float] | None:
    found = (promise or {}).get("store")
    if isinstance(found, list) and len(found) == 2 and all(isinstance(b, (int, float)) for b in found):
        return float(found[0]), float(found[1])
    return None


def alive_until(promise: dict, checkpoint: float | None = None) -> float:
    """Until when the store's evidence keeps the job alive by the reaper's rule, as far as this host knows it:
    its last landed renewal's promise; past it, a pulse or a checkpoint (`checkpoint`: when the last one that landed
    began) that landed after the store's reading of that promise (which the renewal's write time, `late`, can put
    past `until`) keeps it for the evidence window."""
    until = float(promise.get("until") or 0.0)
    after = until + float(promise.get("late") or 0.0)
    window = float(promise.get("window") or 0.0)
    alive = until
    for landed in (promise.get("pulse"), checkpoint):
        if isinstance(landed, (int, float)) and landed > after:
            alive = max(alive, landed + window)
    return alive


def brief(text: str, limit: int) -> str:
    from stado.core.brief import brief as bounded

    return bounded(text, limit)


def _words(ended) -> str:
    code, sig = ended or (None, None)
    return f"signal {sig}" if sig is not None else f"exit {code}" if code is not None else "status unknown"


def _store_has(job_id: str, nonce: str, *, timeout: float) -> list | None:
    """The version of the job's running record if it is the renewal with this nonce (else None), asked of the store
    this process opens (its agent's environment)."""
    import threading

    from stado.agent.standin import running_nonce

    answer: dict = {}

    def ask() -> None:
        try:
            answer["nonce"] = running_nonce(job_id)
        except Exception as e:
            answer["error"] = e

    asker = threading.Thread(target=ask, daemon=True)
    asker.start()
    asker.join(timeout)
    if "error" in answer:
        raise answer["error"]
    if "nonce" not in answer:
        raise TimeoutError(f"no answer within {timeout:.1f} s")
    found = answer["nonce"]
    return list(found[1]) if found is not None and found[0] == nonce else None


def main() -> int:
    control = sys.stdin.fileno()
    got = b""
    while b"\n" not in got:
        piece = os.read(control, 65536)
        if not piece:
            return 0  # its agent went before it said what to keep
        got += piece
    line, rest = got.split(b"\n", 1)
    if rest.startswith(b"done"):
        return 0
    try:
        from runkit.core import jsonfast

        return Keeper(jsonfast.loads(line.decode()), control).run()
    except SystemExit as e:
        return int(e.code or 0)


if __name__ == "__main__":
    sys.exit(main())
