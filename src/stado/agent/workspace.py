"""The jobs' directories on this host, as one agent uses them (the files of hostfiles.py): made when a job is
claimed, given its inputs file and its $STADO_BIN shim, removed when its slot goes (unless --keep-work). The
simulator and the in-process tests pass one that touches no disk."""
import os
import shutil

from runkit.core.clock import SYSTEM, Clock

from ..queue import artifacts
from .config import AgentConfig
from .environment import SHIM_NAME, shim_text, store_env_text
from .hostfiles import (KEEP_FILE, KEPT_FILE, PROMISE_FILE, agent_lock, job_dir, owner_of, read_exit_status, read_json_file,
                        store_env_file, write_marker, write_owner, write_promise)


class Workspace:
    __slots__ = ("agent_id", "cfg", "clock")

    def __init__(self, cfg: AgentConfig, agent_id: str, clock: Clock = SYSTEM):
        self.cfg, self.agent_id, self.clock = cfg, agent_id, clock  # clock: the host's, as the agent's promises use it

    def prepare(self, job_id: str, started_at: str | None) -> str:
        directory = job_dir(self.cfg.work_root, job_id, started_at or "")
        os.makedirs(os.path.join(directory, "work"), mode=0o700, exist_ok=True)
        with open(os.path.join(directory, artifacts.JOB_ID_FILE), "w") as f:
            f.write(job_id + "\n")
        write_owner(directory, self.agent_id)
        if self.cfg.keep_work:
            write_marker(directory, KEEP_FILE)  # kept by its agent's --keep-work: never tidied as a leftover
        if self.cfg.store_env is not None:
            # The store's credentials stay in the work root's store file (0600): the shim only names it.
            env_file = store_env_file(self.cfg.work_root, store_env_text(self.cfg.store_env))
            fd = os.open(os.path.join(directory, SHIM_NAME), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o700)
            with os.fdopen(fd, "w") as f:
                f.write(shim_text(self.cfg.stado_bin, env_file, job_id))
        return directory

    def stado_bin(self, directory: str) -> str:
        """$STADO_BIN of the job in `directory`: its shim (prepare), or the agent's program."""
        return self.cfg.stado_bin if self.cfg.store_env is None else os.path.join(directory, SHIM_NAME)

    def inputs_file(self, directory: str, inputs_json: str) -> str:
        """WC_ARTIFACT_INPUTS_FILE: the job's inputs, as JSON, in a file of its own directory."""
        path = os.path.join(directory, "inputs.json")
        with open(path, "w") as f:
            f.write(inputs_json)
        return path

    def lock_state(self, agent_id: str) -> str:
        """'held' (that agent lives on this work root), 'free' (it ran here and is gone) or 'absent' (it never held
        a lock here, or one that went is tidied away: it may live on another work root)."""
        return agent_lock(self.cfg.work_root, agent_id)

    def directory_of(self, doc) -> str:
        """The directory the attempt `doc` names ran in, whatever work root it lies in: its process's, else the
        one its owner's work root gives it (a process not recorded yet), else the one it would have on this
        agent's."""
        work_dir = (doc.process or {}).get("work_dir")
        if isinstance(work_dir, str) and os.path.isabs(work_dir) and os.path.basename(work_dir) == "work":
            return os.path.dirname(work_dir)
        root = (doc.owner_process or {}).get("work_root")
        return job_dir(root if isinstance(root, str) and os.path.isabs(root) else self.cfg.work_root, doc.id,
                       doc.started_at or "")

    def exit_status(self, directory: str):
        """(exit code, signal) its job's shell ended with, as recorded in `directory`, or None."""
        return read_exit_status(directory)

    def promise(self, directory: str, record: dict) -> None:
        """The attempt's promise for its keeper: `record` with its times (until, trying.began) on this agent's
        monotonic clock, written on CLOCK_BOOTTIME (the keeper's, which a suspend moves on too); `store`, the
        bounds of the store's time less that monotonic clock, likewise (the keeper's records carry the store's time, as the
        agent's do, whatever this host's wall clock says)."""
        shift = self.clock.boottime() - self.clock.monotonic()
        out = dict(record, until=record["until"] + shift)
        if record.get("pulse") is not None:
            out["pulse"] = record["pulse"] + shift
        if record.get("trying"):
            out["trying"] = dict(record["trying"], began=record["trying"]["began"] + shift)
        if record.get("store") is not None:
            out["store"] = [bound - shift for bound in record["store"]]
        try:
            write_promise(directory, out)
        except OSError:
            pass  # its directory went (removed by hand): the keeper finds no promise and leaves

    def promise_done(self, directory: str) -> None:
        """The slot is settled: its keeper (and any keeper an earlier agent of this attempt started) may go."""
        found = read_json_file(directory, PROMISE_FILE)
        if found is not None and not found.get("done"):
            try:
                write_promise(directory, dict(found, done=True))
            except OSError:
                pass

    def kept(self, directory: str) -> dict | None:
        """What the job's keeper wrote before it stopped the job's processes (kept.json), or None."""
        return read_json_file(directory, KEPT_FILE)

    def take(self, directory: str) -> None:
        """The directory is this agent's now (a take-over): never taken for a gone agent's leftover."""
        write_owner(directory, self.agent_id)

    def release(self, directory: str) -> None:
        """The slot is gone. Only a directory still ours: after this agent was stopped past its promise, another
        agent on this host may run the job's next attempt in it (its owner file says so), and that attempt's files
        are not ours."""
        if owner_of(directory) not in (self.agent_id, None):
            return
        if not self.cfg.keep_work:
            shutil.rmtree(directory, ignore_errors=True)
        elif self.cfg.store_env is not None:
            try:
                os.unlink(os.path.join(directory, SHIM_NAME))  # kept work keeps no way into the store
            except OSError:
                pass
