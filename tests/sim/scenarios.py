"""Named scenarios: the three races, each a world shaped to make it likely (a profile pinned
over the drawn one), the seed that found it on the code before the fix, and the signatures it showed there
(the cause, a fencing violation at the stale request, then the harm it did).

`make sim SCENARIO=race1` replays the seed (shrunk, its trace printed) and then explores the profile over
SCENARIO_RUNS more seeds: before the fix the seed fails as recorded; after it, neither the seed nor the
exploration may fail in any way. (A seed names a run of this code: once the code makes other requests, the
same seed is another run, so the exploration is what shows the race gone.)
"""
from collections import namedtuple

SCENARIO_RUNS = 2000

# `runs`: seeds its world is explored over after the seed (a world as heavy as the default exploration's is explored
# over fewer: the default exploration covers it too).
Scenario = namedtuple("Scenario", "seed pinned want about runs", defaults=(SCENARIO_RUNS,))

# No store faults, no crashes: only scheduling and stalls (and one kind of store fault for race2), so that
# what fails here is the race and not one of the other defects the default exploration finds.
_RETRIES = dict(retries=2, exit_fail=0.7, p_fail=0.0, p_lost=0.0, p_crash=0.0, restarts=0, p_stall=0.08,
                skew=0.0, schedule=False, cancel_aim="any", proxy=False)
# The cancel and clock worlds pin the new dimensions off unless they are the point, so each shows its own hole.
_QUIET = dict(_RETRIES, p_jump=0.0)

SCENARIOS = {
    "race1": Scenario(
        seed=80,
        pinned=dict(_RETRIES, agents=3, jobs=1, cancels=0, settle_every=0.5),
        want=["fencing: delete running/ by _settle_leftovers_now>_settle_leftovers>settle_leftovers>settle; leaves "
              "queued", "attempt-twice"],
        about="a stale settle runs a retry twice: a leftovers pass reads a 'finishing' document, its owner "
              "settles it (retry: back to queue/), an agent claims the retry, and the stale pass re-creates "
              "queue/<id> and deletes that agent's running/<id>: the attempt is claimed and run again"),
    "race2": Scenario(
        seed=190,
        pinned=dict(_RETRIES, agents=3, jobs=1, cancels=0, p_fail=0.1, fault_verbs=("delete",)),
        want=["fencing: delete queue/ by _claim_pass>claim>_finish_interrupted_claim;", "lost-job"],
        about="a job vanishes: an agent's claim pass finds a queue entry whose running record was claimed from it "
              "(a leftover, it decides in _finish_interrupted_claim: the claim's own delete failed, or has not run "
              "yet); the owner fails the job with a retry (a new queue entry) before that agent's DELETE, which "
              "removes the new entry: no record of the job is left"),
    "race3": Scenario(
        seed=11392,
        pinned=dict(_RETRIES, agents=3, jobs=1, cancels=2),
        want=["fencing: delete running/ by _claim_pass>claim; leaves queued+cancelled", "run-after-terminal: cancelled"],
        about="a cancelled job runs: a claim from a stale queue read (_claim_is_stale) deletes running/<id> "
              "after a cancel replaced it, leaving queue/ and cancelled/; the next claim pass starts the "
              "cancelled job"),
    "cancel_retry": Scenario(
        seed=1,
        pinned=dict(_QUIET, agents=2, jobs=1, cancels=2, cancel_aim="finishing", slow=("put_if_absent", "queue/")),
        want=["cancel-untrue"],
        about="a cancel lands while a retry is being written: it reports 'already finished (failed); its record is "
              "being written', and the retry then runs"),
    "stale_cancel": Scenario(
        seed=71,
        pinned=dict(_QUIET, agents=3, jobs=1, retries=0, exit_fail=0.0, max_run=20.0, cancels=1, cancel_aim="stale",
                    stall_max=15.0, settle_every=0.5, poll=2.0),
        want=["live-settled"],
        about="a stale worker wakes after its job was requeued, claimed by another agent and cancelled there: its "
              "failed renewal takes that agent's cancel for its own and settles it, and the job reads cancelled "
              "while the other agent's process runs"),
    "proxy": Scenario(
        seed=8,
        pinned=dict(_QUIET, agents=2, jobs=2, proxy=True),
        want=["unsafe-start"],
        about="an agent behind a path that drops every condition starts on the safe verdict another agent cached "
              "for the same store URL, and claims"),
    "skewed_reaper": Scenario(
        seed=2,
        pinned=dict(_QUIET, agents=2, jobs=2, retries=0, max_run=3.0, p_crash=0.03, skew=3600.0),
        want=["unreaped"],
        about="a worker whose clock runs an hour ahead dies: its promise lies an hour in the future by the other "
              "agents' clocks, and its job stays running"),
    "skewed_cron": Scenario(
        seed=2,
        pinned=dict(_QUIET, agents=3, jobs=1, schedule=True, skew=600.0),
        want=["cron-"],
        about="an agent ten minutes ahead fires a schedule's fire times early and moves last_fired on, so the "
              "honest agents fire nothing in between"),
    "lost_renewal_give_back": Scenario(
        seed=8482,
        pinned=dict(schedule=True, p_lost=0.2, p_fail=0.08, agents=3, skew=30.0, retries=2, jobs=1),
        want=["abandoned"],
        about="an agent holds a claim it could not check yet; its renewal lands but the answer is lost, so running/ "
              "moves to a version the agent does not know; its check then finds a terminal record and gives the "
              "claim back at the old version, which is refused, and the slot lets go while running/ still holds "
              "the claim: nothing runs or settles it until a reaper finds its promise broken"),
    "stale_requeue": Scenario(
        seed=410,
        pinned=dict(_QUIET, agents=3, jobs=1, cancels=0, settle_every=0.5, max_run=0.3,
                    slow=("put_if_absent", "queue/")),
        want=["attempt-twice"],
        about="a retry runs twice: several agents' passes each take a failed attempt's decided record to finish its "
              "move, the move is finished and its retry claimed at once; one overtaken settler then creates the "
              "retry's queue entry again in the empty key (a late copy of the move before the running attempt), and "
              "when that attempt fails too its settle finds the copy and takes it for its own retry (its generation, "
              "moved on by every settler's take, is not lower): the claim of it runs the same attempt again"),
    "cancel_refused_delete": Scenario(
        seed=8692,
        pinned=dict(_QUIET, agents=3, jobs=2, cancels=2, settle_every=0.5, max_run=0.3, p_lost=0.03, p_fail=0.03,
                    slow=("put_if_absent", "queue/")),
        want=["settles"],
        about="a cancel of a running job is left in running/: its owner takes the cancel to settle it and stalls; "
              "a reaper, seeing the owner's promise pass, takes it again and stops short on a store error; the "
              "owner wakes, finds the cancelled record, and its delete at the version it took is refused, so it "
              "lets go of a record that still names it with no outcome: nobody finishes the move before a "
              "reaper has watched it for a whole lease"),
    # The fault run of the agents' real faults: each found by this simulator on the code before its fix (the agent of
    # main at 455becf, before renewals had a thread and jobs a keeper, run by this simulator), as its seed and
    # signature record.
    "two_agents_one_host": Scenario(
        seed=7,
        pinned=dict(_QUIET, agents=3, hosts=1, own_roots=True, jobs=3, retries=0, max_run=3.0, cancels=0,
                    p_stall=0.0, p_stop=0.0, restarts=0),
        want=["live-settled"],
        about="two agents on one host, each on a work root of its own: the one that starts later takes the other's "
              "running jobs for ones a replaced worker left (their owner's lock is not on its work root) and requeues "
              "them while they run: each then runs twice"),
    "orphan_outlives_agent": Scenario(
        seed=381,
        pinned=dict(_QUIET, agents=2, hosts=2, jobs=2, retries=0, max_run=3.0, cancels=0, p_crash=0.03, restarts=0,
                    p_stall=0.0, p_stop=0.0),
        want=["overlap"],
        about="an agent dies for good while its job runs: its process runs on, the reaper on another host requeues "
              "the job once the promise has passed, and the next attempt starts beside the first"),
    "cancel_before_start": Scenario(
        seed=126,
        pinned=dict(_QUIET, agents=2, jobs=2, cancels=2, cancel_aim="any", p_stall=0.0, p_stop=0.0,
                    slow=("delete", "queue/")),
        want=["cancelled-started"],
        about="a cancel lands between a claim and the spawn: the agent starts the job it claimed without looking at "
              "its record again, after `stado cancel` said it was cancelled"),
    "outcome_lost": Scenario(
        seed=100,
        pinned=dict(_QUIET, agents=2, jobs=2, retries=1, exit_fail=0.5, max_run=0.3, cancels=0, p_stall=0.0,
                    p_stop=0.05, stall_max=6.0),
        want=["ended-rerun"],
        about="an agent's command ends while the agent is held (stopped, or its loop waiting on slow answers): its "
              "renewals, queued behind the loop, come too late, the job is requeued, and the outcome it held is "
              "thrown away (\"nothing recorded\"): the command runs again"),
    "keeper_wall_clock": Scenario(
        seed=14,
        pinned=dict(_QUIET, agents=2, hosts=2, jobs=2, retries=0, max_run=3.0, cancels=0, p_crash=0.03, restarts=1,
                    skew=600.0, p_stall=0.0, p_stop=0.02),
        want=["record-time"],
        about="a job's keeper speaks for an agent that died on a host whose clock is off: it renews the claim and "
              "writes the verdict by its host's wall clock, not the store's, so the record's times (and the promise "
              "its renewal names, already past by the store's clock) are wrong by the host's skew"),
    # Holes `make sim RUNS=100000` found, each in the world its seed drew (pinned as drawn, so the seed replays
    # the default exploration's run), then explored further in that world.
    "takeover_dies": Scenario(
        seed=28296,
        pinned=dict(agents=3, slots=2, exit_fail=0.3, max_run=1.0, cancels=2, poll=0.5, settle_every=5.0, p_lost=0.03,
                    p_crash=0.03, p_stall=0.08, p_reprioritise=0.02, restarts=1, skew=3600.0, hosts=2, own_roots=True),
        want=["ended-rerun"],
        about="a job's command ends while its agent is dead; as its keeper stands in to record the outcome, the agent "
              "that next starts on the host takes the job over first and dies before recording it: the keeper "
              "left, so nothing held the outcome, and the reaper's requeue ran the ended command again",
        runs=300),
    "takeover_answer_lost": Scenario(
        seed=49432,
        pinned=dict(agents=3, slots=2, jobs=1, retries=2, max_run=3.0, cancels=2, poll=0.5, settle_every=5.0,
                    p_fail=0.03, p_lost=0.01, p_crash=0.01, p_stall=0.03, slow=("list", "running/"),
                    p_reprioritise=0.1, restarts=1, skew=600.0, schedule=True, cancel_aim="finishing", p_stop=0.03),
        want=["abandoned"],
        about="the restart check's take-over lands but its answer is lost, and the read-back fails: the agent said "
              "the job 'could not be settled now' and left it, though the store named it the owner",
        runs=300),
    "kept_verdict_unfinished": Scenario(
        seed=94650,
        pinned=dict(agents=3, slots=2, jobs=4, retries=2, max_run=3.0, cancels=2, p_lost=0.08, p_crash=0.01,
                    p_stall=0.08, p_jump=0.03, priorities=True, p_reprioritise=0.02, own_roots=True, p_stop=0.01),
        want=["settles"],
        about="an agent whose renewals were held finds its job stopped by its keeper, whose requeue was decided but not "
              "yet finished: it let the verdict stand and, with --until-idle, exited before the job was back in "
              "the queue, which nobody then served",
        runs=300),
    "takeover_other_root": Scenario(
        seed=97933,
        pinned=dict(agents=3, slots=2, jobs=4, retries=2, exit_fail=0.3, max_run=3.0, poll=0.5, p_fail=0.01,
                    p_crash=0.01, p_stall=0.03, p_jump=0.03, p_reprioritise=0.1, restarts=2, skew=30.0, schedule=True,
                    proxy=True, own_roots=True, p_stop=0.01),
        want=["overlap"],
        about="an agent on another work root of the host takes over a job whose process was found by its users (its "
              "worker died before recording it) and dies in turn: the record named the taker's work root and no "
              "directory, so the next agent looked in the wrong place, saw no process, and requeued a running job",
        runs=300),
    "keeper_slow_to_look": Scenario(
        seed=21237,
        pinned=dict(slots=2, jobs=4, retries=2, max_run=1.0, poll=0.5, settle_every=0.5, p_fail=0.01, p_lost=0.03,
                    p_crash=0.03, p_stall=0.03, slow=("get", "c"), p_jump=0.03, priorities=True, p_reprioritise=0.1,
                    restarts=2, skew=3600.0, schedule=True, own_roots=True),
        want=["ended-rerun"],
        about="a job's command ends just as the agent that replaced its dead worker starts, while the job's keeper is "
              "slow to look: nothing had recorded the exit yet, so the restart check requeued a job that had ended, "
              "though its keeper was alive and about to write how it ended",
        runs=300),
    "sibling_died_unrecorded": Scenario(
        seed=60138,
        pinned=dict(agents=2, hosts=1, slots=1, restarts=0, jobs=3, retries=2, exit_fail=0.7, max_run=1.0, cancels=1,
                    settle_every=0.5, p_fail=0.08, p_crash=0.01, slow=("put_if_match", "queue/"), p_jump=0.03,
                    p_reprioritise=0.02, p_stop=0.01),
        want=["ended-rerun"],
        about="two agents on one host; one dies for good just after its job's command started, no agent replaces it, "
              "and the job's keeper sees the command end but every write of its stand-in fails: the sibling's reaper "
              "pass lapsed the job by its promise and it ran again, though the sibling could see on the machine that "
              "its owner was gone and its keeper alive, holding how it ended",
        runs=300),
    "held_claim_stopped": Scenario(
        seed=97729,
        pinned=dict(agents=3, hosts=2, slots=1, jobs=2, exit_fail=0.3, max_run=3.0, settle_every=0.5, p_fail=0.08,
                    p_lost=0.01, p_crash=0.01, p_stall=0.03, slow=("delete", "queue/"), p_jump=0.01,
                    p_reprioritise=0.1, restarts=1, schedule=True, p_stop=0.01),
        want=["ended-rerun"],
        about="an agent's claim lands but its check fails (a read of completed/ lost), and the agent is stopped past "
              "the claim's promise: resumed, it counted the promise from when it made the held slot, not from "
              "before the claim's write, so it started the job without renewing; the reaper, by the store's clock, "
              "requeued it and the job ran again",
        runs=300),
}
