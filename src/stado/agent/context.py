"""What the agent's collaborators (the claim pass, the slots and their end, the restart check) are given: the
store, who this agent is, its settings, its clocks, its log, its processes and its job directories. Not the
agent: they return what they decided, and the agent records it (owner.py)."""
from ..core.admission import Holdings, Offer
from ..objectstore.base import ObjectStore
from ..store.storeclock import StoreClock
from .config import AgentConfig
from .lease import LeasePromise
from .logonce import LogOnce


class AgentContext:
    __slots__ = ("agent_id", "cfg", "clock", "holdings", "host", "identity", "instance_ref", "job_env", "lease", "log",
                 "log_once", "new_io", "notify", "offer", "store", "workspace")

    def __init__(self, *, store: ObjectStore, agent_id: str, cfg: AgentConfig, clock: StoreClock, lease: LeasePromise,
                 log, host, workspace, new_io, notify, holdings: Holdings, job_env: dict[str, str]):
        self.store, self.agent_id, self.cfg = store, agent_id, cfg
        self.instance_ref = f"local@{cfg.host}"
        self.clock = clock          # the store's time (now()) and this host's monotonic clock (monotonic())
        self.lease = lease          # the promise each claim and renewal writes
        self.log = log
        self.log_once = LogOnce(log)
        self.host = host            # the jobs' processes (processhost.ProcessHost, or a simulated one)
        self.identity = host.identity(cfg.work_root)  # this agent's process on its host, as its records name it
        self.workspace = workspace  # the jobs' directories (workspace.Workspace, or one that touches no disk)
        self.new_io = new_io        # (job id, directory, attempt) -> the slot's JobIO
        self.notify = notify        # wakes the agent's loop (a transfer thread has finished)
        self.holdings = holdings    # what the running slots reserve of the offer
        self.offer: Offer = holdings.offer
        self.job_env = job_env      # the environment jobs' runtime variables are taken from
