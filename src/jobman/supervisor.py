"""The detached supervisor: `jobman __supervise JOB_ID`, one per job, in its own session.

It reads the launch credential on stdin, claims the job (seed 000), writes one acknowledgement on
stdout, and from then on owns the job: it renews its lease, decides eligibility (dependencies,
not-before, retry delay, concurrency slot), runs each attempt in its own session with output
straight into a per-attempt log file, enforces the timeout and the log cap, stops the whole tree
on timeout or cancel, and records how each attempt and the job ended.
"""
import os
import select
import sys
import time

from runkit import proc
from runkit.durations import format_time
from runkit.hashing import sha256
from runkit.ids import is_uuid, uuid7
from runkit.jsonfast import loads
from runkit.retry import is_retryable, retry_delay

from . import db, doorbell, faults, home as homes, queries, reconcile, scheduling, transitions
from .dbretry import DatabaseGone, Retrier, jitter
from .errors import Conflict, JobmanError

CREDENTIAL_BYTES = 32
EXIT_REFUSED = 3
GRACE_AFTER_EXIT = 2.0  # seconds a target's leftover processes get between SIGTERM and SIGKILL
# SQLite's own busy wait (it sleeps and retries inside the call) covers the ordinary few milliseconds
# of another writer's transaction; longer trouble comes back to our retry layer, which logs it and
# lets the supervisor go on supervising meanwhile.
BUSY_TIMEOUT_MS = 1_000
CLAIM_GRACE = 1.0  # seconds past the claim deadline a claim is still tried (the transaction refuses it)
MAX_CLAIM_WAIT = 60.0  # while even the deadline cannot be read


class LogUnwritable(OSError):
    """The attempt's log file cannot be made (a full disk, a read-only home)."""


class Fenced(Exception):
    """This supervisor no longer owns the job (finished by someone else, or another owner)."""


def main(args: list[str]) -> int:
    if len(args) != 1 or not is_uuid(args[0]):
        sys.stderr.write("jobman __supervise: private command; it takes exactly one job id and nothing else\n")
        return 2
    job_id = args[0]
    credential = _read_credential()
    if len(credential) != CREDENTIAL_BYTES:
        sys.stderr.write("jobman __supervise: refused: no launch credential on stdin\n")
        return EXIT_REFUSED
    home = homes.home_dir()
    path = homes.db_path(home)
    try:
        conn = db.connect(path, create=False, busy_timeout_ms=BUSY_TIMEOUT_MS)
    except JobmanError as e:
        sys.stderr.write(f"jobman __supervise: refused: {e}\n")
        return EXIT_REFUSED
    trace = os.environ.get("JOBMAN_TEST_QUERY_LOG")
    if trace:  # the tests count what an idle supervisor asks of the database
        log = open(trace, "a", buffering=1)
        pid = os.getpid()
        conn.set_trace_callback(lambda sql: log.write(f"{time.time():.3f} {pid} {' '.join(sql.split())[:80]}\n"))
    conn.relax()
    store = Retrier(conn, path, _log)
    supervisor_id = uuid7()
    me = proc.self_identity()
    faults.hit("supervisor:before_claim")
    if faults.active("supervisor:late_claim"):
        _sleep_past_deadline(conn, job_id)
    try:
        state = _claim(store, job_id, sha256(credential), supervisor_id, me)
    except (transitions.ClaimRefused, DatabaseGone) as e:
        sys.stderr.write(f"jobman __supervise: refused: {e}\n")
        return EXIT_REFUSED
    del credential
    faults.hit("supervisor:after_claim")
    _acknowledge(job_id, supervisor_id)
    _detach(home, job_id)
    import gc

    gc.freeze()  # what start-up made lives as long as we do: no collection need ever walk it again
    return Supervisor(store, home, job_id, supervisor_id, state).run()


def _claim(store: Retrier, job_id: str, credential_hash: bytes, supervisor_id: str, me):
    """The claim, retried through storage trouble until its deadline (after which it cannot succeed)."""
    give_up = time.time() + MAX_CLAIM_WAIT  # until the deadline itself can be read
    while True:
        ok, value = store.try_once("claim the job", transitions.claim, job_id, credential_hash, supervisor_id,
                                   me.pid, me.start_time, me.boot_id, time.time())
        if ok:
            return value
        found, row = store.try_once("read the claim deadline", lambda c: c.execute(
            "SELECT claim_deadline FROM job_state WHERE job_id = ?", (job_id,)).fetchone())
        if found and row is not None and row[0] is not None:
            give_up = row[0] + CLAIM_GRACE
        if time.time() + value > give_up:
            raise transitions.ClaimRefused(f"could not claim job {job_id} before its deadline: {store.reason}")
        time.sleep(value)


def _read_credential() -> bytes:
    data = b""
    while len(data) < CREDENTIAL_BYTES + 1:
        try:
            chunk = os.read(0, CREDENTIAL_BYTES + 1 - len(data))
        except OSError:
            break
        if not chunk:
            break
        data += chunk
    return data


def _sleep_past_deadline(conn, job_id: str) -> None:
    row = conn.execute("SELECT claim_deadline FROM job_state WHERE job_id = ?", (job_id,)).fetchone()
    if row and row[0]:
        time.sleep(max(0.0, row[0] - time.time()) + 0.05)


def _acknowledge(job_id: str, supervisor_id: str) -> None:
    from .ack import encode as encode_ack

    data = encode_ack(job_id, supervisor_id)
    if faults.active("supervisor:bad_ack"):
        data = data.replace(b"}", b',"extra":true}')
    elif faults.active("supervisor:big_ack"):
        data = b"{" + b" " * 200_000 + b"}"
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(1, view):]
    except OSError:
        pass  # the CLI is gone or stopped reading: ownership is committed, so the job goes on


def _detach(home: str, job_id: str) -> None:
    """Close the launch pipes and send our own stderr to the job's supervisor log."""
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    try:
        os.makedirs(homes.job_log_dir(home, job_id), mode=0o700, exist_ok=True)
        log = os.open(homes.supervisor_log_path(home, job_id), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    except OSError:
        log = os.dup(null)  # a full or read-only home: the job goes on, unlogged
    os.close(null)
    os.dup2(log, 2)
    os.close(log)
    os.chdir("/")


def _log(message: str) -> None:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime())
    try:
        os.write(2, f"{stamp} {message}\n".encode(errors="replace"))
    except OSError:
        pass


class Supervisor:
    def __init__(self, store: Retrier, home: str, job_id: str, supervisor_id: str, state):
        self.db, self.home, self.job_id, self.supervisor_id = store, home, job_id, supervisor_id
        self.rev = state["revision"]
        self.lease = state["lease_duration"]
        self.renew_every = state["renew_interval"]
        self.poll_every = state["poll_interval"]
        self.group = state["group_name"]
        self.renewed_at = time.time()
        self.next_renew = self.renewed_at + self._renew_gap()
        self.next_reconcile = 0.0
        self.next_file_check = 0.0
        self.dirty = False
        self.waiting = None  # (waiting_for, detail, until) last written
        self.subreaper = False
        self.spec = None
        self.bell = None
        self.target = None  # pid of the running target, until it is reaped
        self.unrecorded = None  # the target's identity, while writing it waits for the database
        self.next_record = 0.0

    def _renew_gap(self) -> float:
        # Jittered, so that the renewals of thousands of supervisors never line up.
        return jitter(self.renew_every, 0.8, 1.0)

    # --- ownership ------------------------------------------------------------------------------

    def run(self) -> int:
        _log(f"supervisor {self.supervisor_id} (pid {os.getpid()}) owns job {self.job_id}")
        self.poller = select.poll()
        self._open_bell()
        try:
            try:
                self.spec = loads(self.db.call("read the job's specification", queries.spec_json, self.job_id))
                self.spec["argv"], self.spec["env"]  # noqa: B018  (a corrupt spec fails here, not mid-run)
            except (ValueError, KeyError, TypeError) as e:
                self._finish("failed", f"the stored job specification is unreadable: {e}")
                return 1
            self._loop()
            if self.spec.get("on_finish"):
                from .hooks import run_on_finish

                run_on_finish(self.db, self.home, self.job_id, self.spec, _log)
            return 0
        except Fenced as e:
            _log(f"no longer the owner of the job ({e}); exiting without touching it")
            return 0
        except DatabaseGone as e:
            self._abandon(str(e))
            return 0
        except Exception:
            import traceback

            _log("supervisor error:\n" + traceback.format_exc())
            return 1
        finally:
            if self.bell is not None:
                self.bell.close()

    def _open_bell(self) -> None:
        try:
            self.bell = doorbell.Doorbell(self.home, self.job_id)
        except OSError as e:  # a full disk has no room for the FIFO: the fallback poll must do
            if self.bell is None and not getattr(self, "_bell_error", None):
                _log(f"cannot make the doorbell ({e.strerror}): polling every {self._poll_gap():.1f}s until it can")
            self._bell_error = e
            return
        self.poller.register(self.bell.fd, select.POLLIN)

    def _poll_gap(self) -> float:
        return self.poll_every if self.bell is not None else min(self.poll_every, self.renew_every)

    def _abandon(self, reason: str) -> None:
        """The database at our path is not the one we own the job in: claim nothing, write nothing more,
        and leave the target (if one runs) to finish on its own."""
        if self.target is None:
            _log(f"{reason}: this supervisor no longer claims job {self.job_id}; no target was running; exiting")
            return
        _log(f"{reason}: this supervisor no longer claims job {self.job_id} and writes nothing more to any "
             f"database; its target (pid {self.target}) is left to finish")
        status = proc.wait_child(self.target)
        if status is not None:
            code, sig = proc.describe_status(status)
            _log(f"the target (pid {self.target}) ended with "
                 + (f"exit code {code}" if sig is None else f"signal {proc.signal_name(sig)}") + "; not recorded")

    def _refresh(self):
        state = self.db.call("reload the job's state", transitions.load_state, self.job_id)
        self._check_owner(state)
        self.rev = state["revision"]
        return state

    def _check_owner(self, state) -> None:
        if state is None:
            raise Fenced("the job record is gone")
        if state["supervisor_id"] != self.supervisor_id:
            raise Fenced(f"owned by supervisor {state['supervisor_id']}")
        if state["phase"] == "finished":
            raise Fenced(f"finished {state['outcome']} by another process")

    def _renew(self, now: float) -> None:
        """Renew the lease, or, if the database cannot take it now, try again after a backoff: a late
        renewal is safe (reconciliation leaves a job alone while its supervisor verifies as alive).
        Every poll interval it also checks that the database file is still the one it opened."""
        if now >= self.next_file_check:
            self.next_file_check = now + self.poll_every
            self.db.check_file()
        while True:
            try:
                ok, value = self.db.try_once("renew the lease", transitions.renew_lease, self.job_id,
                                             self.supervisor_id, self.rev, now + self.lease)
                break
            except Conflict:
                self._refresh()
                self.dirty = True  # something else changed the job (a cancel request, ...): look again
        if not ok:
            self.next_renew = now + value
            return
        self.rev = value
        if self.db.waits:
            self._record_waits()
        late = now - self.renewed_at - self.renew_every
        if late > self.renew_every:
            _log(f"lease renewed {late:.1f}s late")
        self.renewed_at = now
        self.next_renew = now + self._renew_gap()

    def _record_waits(self) -> None:
        """Record in the job's events how long the database kept this supervisor waiting (and why), now
        that it can be written; whatever cannot be written yet waits for the next renewal."""
        while self.db.waits:
            ok, _ = self.db.try_once("record a wait for the database", transitions.add_attempt_note, self.job_id,
                                     "database_waited", time.time(), **self.db.waits[0])
            if not ok:
                return
            self.db.waits.pop(0)

    def _idle(self, until: float, pidfd: int | None = None, on_renewal: bool = False) -> str:
        """Sleep until `until`, a doorbell ring or the target's exit, renewing the lease on time.
        on_renewal: `until` is no deadline, so wake at the first renewal from then on instead (a
        fallback poll then costs no wake-up of its own). Returns "bell", "exit" or "time"."""
        while True:
            now = time.time()
            if now >= self.next_renew:
                self._renew(now)
            if self.dirty:
                self.dirty = False
                return "bell"
            if on_renewal and now >= until:
                return "time"
            end = self.next_renew if on_renewal else min(until, self.next_renew)
            timeout_ms = max(0, int((end - now) * 1000) + 1)
            for fd, _ in self.poller.poll(timeout_ms):
                if fd == pidfd:
                    return "exit"
                if self.bell is not None and fd == self.bell.fd:
                    self.bell.drain()
                    return "bell"
            if time.time() >= until:
                return "time"

    def _pause(self, seconds: float) -> None:
        """How a write waiting out storage trouble pauses: idling, so the lease keeps being renewed."""
        self._idle(time.time() + seconds)

    # --- waiting until eligible ---------------------------------------------------------------------

    def _loop(self) -> None:
        while True:
            now = time.time()
            snap = self.db.call("read the job's state", queries.snapshot, self.job_id, now, pause=self._pause)
            self._check_owner(snap)
            self.rev = snap["revision"]
            if snap["deps_stale"] and self._settle(now):
                continue
            if snap["cancel_requested_at"] is not None:
                self._finish("cancelled", "cancelled before it ran" if snap["attempts"] == 0
                             else f"cancelled while waiting for attempt {snap['attempts'] + 1}")
                return
            verdict, detail = scheduling.dependency_verdict(loads(snap["deps"]))
            if verdict == "impossible":
                self._finish("dependency_failed", detail)
                return
            if verdict == "wait":
                self._wait("dependencies", detail, None, now)
                continue
            retry_at = snap["wait_until"] if snap["waiting_for"] == "retry" else None
            gate, until = scheduling.time_verdict(self.spec.get("not_before"), retry_at, now)
            if gate != "ready":
                label = "not before" if gate == "not_before" else "retry delay until"
                self._wait(gate, f"{label} {format_time(until)}",
                           until, now, keep_detail=gate == "retry")
                continue
            if snap["held_at"] is not None:  # after the time gates, so a held retry keeps its delay
                self._wait("held", "held (jobman release JOB lets it go on)", None, now)
                continue
            if self._take_slot(snap, now):
                return

    def _take_slot(self, snap, now: float) -> bool:
        """Start an attempt if the group has room for this job now; else wait. True when the job is finished."""
        limit, held = snap["slot_limit"] or 0, snap["slots_held"]
        front = self.db.call("read the front of the line", queries.front_of_line, self.group,
                             max(limit - held, 1), pause=self._pause)
        me = (self.job_id, snap["priority"], snap["submitted_at"])
        if self._blocked_by_the_dead(snap, front, me, now) and self._settle(now):
            return False
        if scheduling.slot_verdict(limit, held, front, me):
            number = snap["attempts"] + 1
            log_path = homes.attempt_log_path(self.home, self.job_id, number)
            try:
                rev = self.db.call("take a slot", transitions.try_begin_attempt, self.job_id, self.rev, number,
                                   log_path, now, pause=self._pause)
            except Conflict:
                return False
            if rev is not None:
                self.rev = rev
                self.waiting = None
                return self._run_attempt(number, log_path)
        detail = (f"group {self.group} is paused (limit 0)" if limit == 0 else
                  f"group {self.group} is full (limit {limit})")
        self._wait("slot", detail, None, now)
        return False

    def _blocked_by_the_dead(self, snap, front: list, me: tuple, now: float) -> bool:
        """Whether something that stands in this job's way looks abandoned: a job ahead in line past its
        lease, or (for the jobs at the front only, so that one dead holder does not send the whole
        line to reconcile) a slot holder past its lease or finished while holding its slot."""
        if any(row[0] != self.job_id and row[3] is not None and row[3] < now for row in front):
            return True
        at_front = scheduling.ahead_of(front, me) < max(len(front), 1)  # in the front rows, or no line at all
        return bool(snap["holders_stale"]) and at_front

    def _settle(self, now: float) -> bool:
        """Run the reconciliation pass ourselves (nobody may be running commands), at most once per
        renewal interval. Whether it changed anything."""
        if now < self.next_reconcile:
            return False
        self.next_reconcile = now + self.renew_every
        ok, changes = self.db.try_once("settle abandoned jobs", reconcile.run, self.home, now)
        return bool(ok and changes)

    def _wait(self, waiting_for: str, detail: str, until: float | None, now: float, keep_detail=False) -> None:
        """Record why the job waits (if that changed), then sleep until something may have changed."""
        current = (waiting_for, detail, until)
        if current != self.waiting:
            state = self.db.call("reload the job's state", transitions.load_state, self.job_id, pause=self._pause)
            self._check_owner(state)
            if keep_detail and state["waiting_for"] == waiting_for:
                current = self.waiting = (waiting_for, state["wait_detail"], until)
            else:
                try:
                    self.rev = self.db.call("record why the job waits", transitions.set_waiting, self.job_id,
                                            state["revision"], waiting_for, detail, until, now,
                                            announce=state["waiting_for"] != waiting_for, pause=self._pause)
                except Conflict:
                    return
                self.waiting = current
                if waiting_for in ("slot", "held"):  # in line, or out of it: those behind may now start
                    self._wake_slot_waiters()
        if self.bell is None:
            self._open_bell()
        # The fallback poll: long, jittered, and made at a lease renewal (the doorbell is what wakes a
        # waiter in time); never more often than the poll interval.
        wake = now + jitter(self._poll_gap(), 1.0, 1.5)
        if until is not None and until < wake:
            self._idle(until)
        else:
            self._idle(wake, on_renewal=True)

    def _finish(self, outcome: str, detail: str) -> None:
        self._record_waits()
        while True:
            try:
                self.rev = self.db.call("record that the job finished", transitions.finish, self.job_id, self.rev,
                                        outcome, time.time(), detail, pause=self._pause)
                break
            except Conflict:
                self._refresh()
        self._record_waits()
        _log(f"job finished {outcome}: {detail}")
        self._wake_after_finish()

    def _wake_after_finish(self) -> None:
        dependents = self.db.call("find the dependents to wake", queries.dependents_to_wake, self.job_id,
                                  give_up_after=self.lease)
        doorbell.ring_all(self.home, dependents or ())
        self._wake_slot_waiters()

    def _wake_slot_waiters(self) -> None:
        """Ring as many of the group's line as there are free slots, in the order they may take one."""
        def first_waiters(conn):
            free = queries.free_slots(conn, self.group)
            return queries.slot_waiters(conn, self.group, free) if free else []

        doorbell.ring_all(self.home, self.db.call("find the waiters to wake", first_waiters,
                                                  give_up_after=self.lease) or ())

    # --- running an attempt -------------------------------------------------------------------------

    def _run_attempt(self, number: int, log_path: str) -> bool:
        """Run attempt `number` to its end. Returns True when the job is finished."""
        spec = self.spec
        self.disk_full = False
        faults.hit("supervisor:before_spawn")
        try:
            pid = self._spawn(number, log_path)
        except LogUnwritable as e:
            reason = f"cannot create its log file {log_path}: {e.strerror or e}"
        except OSError as e:
            reason = f"cannot start {spec['argv'][0]!r}: {e.strerror or e}"
        else:
            reason = None
        if reason is not None:
            self._append_log(log_path, f"jobman: {reason}\n")
            self._end_attempt(number, None, None, "spawn_failed", reason, None, "failed", reason)
            return True
        self.target = pid
        faults.hit("supervisor:before_record")
        st = proc.stat(pid)
        self.unrecorded = (number, pid, st.start_time if st else 0, proc.boot_id(), pid)
        self._record_target()
        faults.hit("supervisor:after_spawn")
        status, stop_reason = self._watch(pid, log_path)
        self.target = None
        self._sweep()
        if self.unrecorded is not None:  # recorded late beats never: show and the events keep the pid
            self.db.call("record the target", self._record_target_now, pause=self._pause)
        exit_code, sig = proc.describe_status(status)
        policy = spec["retry"]
        now = time.time()
        self.disk_full = self.disk_full or _filesystem_full(log_path)
        if self.disk_full:
            self._note_disk_full(number, log_path)
        if stop_reason == "cancelled":
            return self._end_attempt(number, exit_code, sig, "cancelled", None, None, "cancelled",
                                     f"cancelled during attempt {number}")
        if stop_reason == "timed_out":
            retry = is_retryable(policy, number, exit_code, sig, timed_out=True)
            return self._end_attempt(number, exit_code, sig, "timed_out", None,
                                     now + retry_delay(policy, number) if retry else None, "timed_out",
                                     f"attempt {number} exceeded its timeout of {spec['timeout']}s")
        if exit_code == 0:
            return self._end_attempt(number, 0, None, "succeeded", None, None, "succeeded", None)
        retry = is_retryable(policy, number, exit_code, sig, timed_out=False)
        how = f"exit code {exit_code}" if exit_code is not None else f"signal {proc.signal_name(sig)}"
        full = "; the filesystem of its log was full, so output may be missing" if self.disk_full else ""
        return self._end_attempt(number, exit_code, sig, "failed", None,
                                 now + retry_delay(policy, number) if retry else None, "failed",
                                 f"attempt {number} ended with {how}{full}")

    def _record_target(self) -> None:
        """Write the target's identity, or leave it for later if the database cannot take it now. Until it
        is written, the job's processes are found by the JOBMAN_JOB_ID in their environment."""
        if self.unrecorded is None or time.time() < self.next_record:
            return
        ok, wait = self.db.try_once("record the target", self._record_target_now)
        if not ok:
            self.next_record = time.time() + wait

    def _record_target_now(self, conn) -> None:
        transitions.record_target(conn, self.job_id, *self.unrecorded, time.time())
        self.unrecorded = None

    def _note_disk_full(self, number: int, log_path: str) -> None:
        _log(f"attempt {number}: the filesystem of {log_path} was full while it ran; its output may be missing")
        self.db.call("note the full disk", transitions.add_attempt_note, self.job_id, "log_disk_full", time.time(),
                     attempt=number, pause=self._pause)

    def _spawn(self, number: int, log_path: str) -> int:
        spec = self.spec
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC
        try:
            os.makedirs(os.path.dirname(log_path), mode=0o700, exist_ok=True)
            out = os.open(log_path, flags, 0o600)
        except OSError as e:
            raise LogUnwritable(e.errno, e.strerror) from None
        err = out
        null = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        old_umask = os.umask(spec.get("umask", 0o022))
        try:
            if spec["log"].get("separate_stderr"):
                try:
                    err = os.open(homes.attempt_log_path(self.home, self.job_id, number, "stderr"), flags, 0o600)
                except OSError as e:
                    raise LogUnwritable(e.errno, e.strerror) from None
            if not self.subreaper:
                self.subreaper = proc.become_subreaper()
            env = dict(spec["env"])
            env["JOBMAN_JOB_ID"] = self.job_id
            env["JOBMAN_ATTEMPT"] = str(number)
            return proc.spawn(spec["executable"], spec["argv"], env, stdin=null, stdout=out, stderr=err,
                              cwd=spec["cwd"])
        finally:
            os.umask(old_umask)
            os.close(null)
            os.close(out)
            if err != out:
                os.close(err)

    def _watch(self, pid: int, log_path: str) -> tuple[int, str | None]:
        """Wait for the target to exit while enforcing timeout, cancel and the log cap."""
        spec = self.spec
        started = time.time()
        deadline = started + spec["timeout"] if spec.get("timeout") else float("inf")
        kill_after = spec.get("kill_after", 10.0)
        caps = self._open_caps(log_path)
        pidfd = _pidfd(pid)
        if pidfd is not None:
            self.poller.register(pidfd, select.POLLIN)
        stop_reason, kill_at, check_every, next_check = None, None, 0.05, time.time()
        status = None
        try:
            while status is None:
                until = min(deadline if stop_reason is None else float("inf"), kill_at or float("inf"), next_check,
                            self.next_record if self.unrecorded is not None else float("inf"))
                if pidfd is None:
                    until = min(until, time.time() + 0.05)
                event = self._idle(until, pidfd)
                status = self._reap(pid)
                if status is not None:
                    break
                now = time.time()
                self._record_target()
                if event == "bell" and stop_reason is None:
                    state = self._refresh()
                    if state["cancel_requested_at"] is not None:
                        stop_reason, kill_at = "cancelled", now + kill_after
                        _log(f"cancel requested: stopping the process tree of pid {pid}")
                        proc.signal_tree(os.getpid(), 15)
                if stop_reason is None and now >= deadline:
                    stop_reason, kill_at = "timed_out", now + kill_after
                    _log(f"timeout: stopping the process tree of pid {pid}")
                    proc.signal_tree(os.getpid(), 15)
                if kill_at is not None and now >= kill_at:
                    proc.signal_tree(os.getpid(), 9)
                    kill_at = now + 1.0
                if now >= next_check:
                    self.disk_full = self.disk_full or _filesystem_full(log_path)
                    grew = self._enforce_caps(caps)
                    check_every = 0.02 if grew else min(check_every * 2, 0.5)
                    next_check = now + check_every
        finally:
            if pidfd is not None:
                self.poller.unregister(pidfd)
                os.close(pidfd)
            self._enforce_caps(caps)
            self._record_dropped(caps)
            for cap in caps:
                cap.close()
        return status, stop_reason

    def _reap(self, target: int) -> int | None:
        """Collect exited children (the target, and orphans re-parented to us); the target's status."""
        status = None
        for pid, st in proc.reap_children():
            if pid == target:
                status = st
        return status

    def _sweep(self) -> None:
        """After the target exits, no process of its tree may be left running: TERM, then KILL."""
        me = os.getpid()
        if not proc.live_descendants(me):
            return
        _log("the target left processes behind: stopping them")
        proc.signal_tree(me, 15)
        give_up = time.time() + min(GRACE_AFTER_EXIT, self.spec.get("kill_after", 10.0))
        while time.time() < give_up:
            proc.reap_children()
            if not proc.live_descendants(me):
                return
            self._idle(min(give_up, time.time() + 0.05))
        for _ in range(50):
            if not proc.signal_tree(me, 9):
                break
            time.sleep(0.02)
            proc.reap_children()
        proc.reap_children()

    def _open_caps(self, log_path: str) -> list:
        limit = self.spec["log"].get("limit") or 0
        if limit <= 0:
            return []
        from runkit.logcap import LogCap

        paths = [log_path]
        if self.spec["log"].get("separate_stderr"):
            paths.append(log_path[:-4] + ".stderr.log")
        caps = []
        for path in paths:
            try:
                caps.append(LogCap(path, limit))
            except OSError:
                pass
        return caps

    def _enforce_caps(self, caps) -> bool:
        grew = False
        for cap in caps:
            try:
                size = cap.size()
                grew |= size != getattr(cap, "last_size", 0)
                cap.last_size = size
                if cap.enforce():
                    _write_cut_count(cap.path, cap.dropped, cap.shift, cap.at_line_start)
            except OSError as e:
                _log(f"log cap: {e}")
        return grew

    def _record_dropped(self, caps) -> None:
        dropped = sum(cap.dropped for cap in caps)
        if dropped:
            self.db.call("record the dropped output", transitions.add_attempt_note, self.job_id, "log_truncated",
                         time.time(), bytes_dropped=dropped, limit=self.spec["log"]["limit"], pause=self._pause)

    def _append_log(self, path: str, text: str) -> None:
        try:
            os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
            with open(path, "a") as f:
                f.write(text)
        except OSError:
            pass

    def _end_attempt(self, number, exit_code, sig, attempt_outcome, error, retry_at, job_outcome, detail) -> bool:
        now = time.time()
        self._record_waits()
        while True:
            try:
                self.rev = self.db.call(
                    "record the attempt's end", transitions.end_attempt, self.job_id, self.rev, number, now=now,
                    exit_code=exit_code, signal=sig, attempt_outcome=attempt_outcome, error=error, retry_at=retry_at,
                    job_outcome=None if retry_at is not None else job_outcome, detail=detail, pause=self._pause)
                break
            except Conflict:
                self._refresh()
        self._record_waits()
        if retry_at is not None:
            _log(f"attempt {number} {attempt_outcome}; retry scheduled")
            self._wake_slot_waiters()
            return False
        _log(f"job finished {job_outcome}" + (f": {detail}" if detail else ""))
        self._wake_after_finish()
        return True


def _write_cut_count(log_path: str, dropped: int, shift: int, at_line_start: bool) -> None:
    """Tell readers how many bytes the cap has cut from the front so far, how far the file's offsets
    lag the output's, and whether the first kept byte begins a line (see runkit.logcap)."""
    tmp = f"{log_path}.cut.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)  # private, as the log is
    try:
        os.write(fd, f"{dropped} {shift} {int(at_line_start)}".encode())
    finally:
        os.close(fd)
    os.replace(tmp, f"{log_path}.cut")


def _filesystem_full(path: str) -> bool:
    """Whether the filesystem holding `path` has no room left for this user (checked as the target runs)."""
    try:
        st = os.statvfs(os.path.dirname(path))
    except OSError:
        return False
    return (st.f_bfree if os.geteuid() == 0 else st.f_bavail) * st.f_frsize < 4096


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None
