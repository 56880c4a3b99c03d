"""The jobs' directories on this host, as one agent uses them (the files of workroot.py): made when a job is
claimed, given its inputs file and its $STADO_BIN shim, removed when its slot goes (unless --keep-work). The
simulator and the in-process tests pass one that touches no disk."""
import os
import shutil

from .. import artifacts
from .config import AgentConfig
from .environment import SHIM_NAME, shim_text
from .workroot import job_dir, owner_of, write_owner


class Workspace:
    __slots__ = ("agent_id", "cfg")

    def __init__(self, cfg: AgentConfig, agent_id: str):
        self.cfg, self.agent_id = cfg, agent_id

    def prepare(self, job_id: str, started_at: str | None) -> str:
        directory = job_dir(self.cfg.work_root, job_id, started_at or "")
        os.makedirs(os.path.join(directory, "work"), mode=0o700, exist_ok=True)
        with open(os.path.join(directory, artifacts.JOB_ID_FILE), "w") as f:
            f.write(job_id + "\n")
        write_owner(directory, self.agent_id)
        if self.cfg.store_env is not None:
            # It may name credentials: readable by this user alone, in a directory only this user can enter.
            fd = os.open(os.path.join(directory, SHIM_NAME), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o700)
            with os.fdopen(fd, "w") as f:
                f.write(shim_text(self.cfg.stado_bin, self.cfg.store_env, job_id))
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
                os.unlink(os.path.join(directory, SHIM_NAME))  # kept work keeps no credentials
            except OSError:
                pass
