"""`stado agent --drain`: the agents running on this host claim nothing new, hand back to the queue what they
claimed but have not started, let what runs finish, and exit; this waits until they have.

The agents are found by their lock files under the host's work root (hostfiles.live_agents): a held lock is a
live agent, and the file names its pid and start time, so the SIGTERM reaches that very process and never a
later one with its pid. A request file beside the lock tells it the SIGTERM means a drain. An agent from
before drains existed treats it as a plain SIGTERM (it lets its unstarted jobs start and finish too).
"""
import json
import signal
import time

from runkit.system import proc

from .hostfiles import agent_gone, drain_path, live_agents


def drain(work_root: str, *, say, poll: float = 0.2) -> int:
    """Drain every live agent of `work_root` and wait for each to exit. Returns how many were drained."""
    agents = live_agents(work_root)
    if not agents:
        say(f"no agent runs on this host's work root {work_root}; nothing to drain")
        return 0
    asked = []
    for record in agents:
        agent_id, pid = str(record.get("agent")), record["pid"]
        start = record.get("start_time")
        if start is None:  # an agent from before start times were recorded: its held lock vouches for the pid
            st = proc.stat(pid)
            start = st.start_time if st is not None else None
        with open(drain_path(work_root, agent_id), "w") as f:
            json.dump({"requested_at": time.time()}, f)
        if start is None or not proc.signal_exact(pid, start, signal.SIGTERM):
            say(f"agent {agent_id} (pid {pid}) exited before it could be asked to drain")
            continue
        say(f"agent {agent_id} (pid {pid}): draining (claims nothing new, hands back what has not started, "
            "lets what runs finish)")
        asked.append((agent_id, pid))
    while asked:
        for agent_id, pid in [a for a in asked if agent_gone(work_root, a[0])]:
            say(f"agent {agent_id} (pid {pid}) has exited")
            asked.remove((agent_id, pid))
        if asked:
            time.sleep(poll)
    return len(agents)
