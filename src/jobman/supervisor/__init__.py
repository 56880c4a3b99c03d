"""One job's supervisor (`jobman __supervise JOB_ID`, one detached process per job): the owner and everything
it hands work to, in one place.

    claim.py          the handoff: the launch credential read, the claim, the acknowledgement, the detach
    owner.py          Supervisor: the owner's state, declared in one place; wait, attempt, record, until finished
    context.py        SupervisorContext: what the collaborators get (store, ids, windows, clock, processes, log)
    lease.py          Lease: the job's revision, its lease (alone or through the round), its place in line, the
                      doorbell and the sleep between (idle), during which the lease is kept
    lease_round.py    one pass of the lease round, as its holder runs it (a Look at the line beside it)
    waiting.py        the wait loop: dependencies, time gates, holds, a slot; it returns Begin or Finish
    attempt.py        Attempt: one run of the target, watched; it returns an AttemptEnd the owner records
    lean_return.py    `__resume`: back from the lean waiting form (jobman.supervisor.lean), in the same process
    processes.py      Processes: the process layer (the target, its tree, liveness, the poller, the exec)

`main` (claim) and `resume` are what a supervisor's interpreter is started with (jobman.handoff.launch, the lean form's
exec back: `from jobman.supervisor import main`); they are looked up on first use, so that importing this package
loads nothing the claim does not need.
"""


def __getattr__(name: str):
    if name == "main":
        from .claim import main

        return main
    if name == "resume":
        from .lean_return import resume

        return resume
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
