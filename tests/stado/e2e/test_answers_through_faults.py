"""Real `stado submit` and `stado cancel` processes against SeaweedFS through tests/stado/faultproxy.py (writes that
commit and then lose their answer, requests failed before they reach the server, a storm of 503s): what each
command says and its exit code match what the store holds. Exit 0: it landed; 4: it did not (nothing written);
7: it could not tell (a submit prints the id anyway)."""
import json

import pytest

from stado.core import keys

from ..faultproxy import Rule, for_target, through
from ..storekit import make_target
from .support import Agent, run_until_idle, stado, wait_for

ONCE = {"max_retries": 0}  # each request tried once by the client: stado's own tries are what is tested


@pytest.fixture
def target(seaweedfs, tmp_path):
    return make_target("s3", tmp_path, seaweedfs)


@pytest.fixture
def proxy(target):
    with for_target(target, seed=20261202) as proxy:
        yield proxy


@pytest.fixture
def direct(target):
    store = target.open()
    yield store
    store.close()


@pytest.fixture
def env(target, proxy, make_stado_env, tmp_path):
    """The environment of a `stado` reaching the store through the proxy, with STADO_CONFIG options on top."""
    made = []

    def make(**options):
        made.append(1)
        return make_stado_env(through(target, proxy, **options), tmp_path / f"through-{len(made)}")
    return make


@pytest.fixture
def stado_env_direct(target, make_stado_env, tmp_path):
    return make_stado_env(target, tmp_path / "direct")


def jobs_in(store) -> dict[str, dict]:
    """job id -> its record, from every prefix of a job's life, read directly (not through the proxy)."""
    found = {}
    for prefix in keys.STATE_PREFIXES.values():
        for entry in store.list(prefix):
            found[keys.job_id_of(entry.key, prefix)] = json.loads(store.get(entry.key).data)
    return found


def test_fifty_submits_through_lost_answers_report_every_job_that_exists(env, proxy, direct, stado_env_direct,
                                                                        tmp_path):
    """20% of creates and plain writes (the claim-order index entry) commit and lose their answer (a 503, a 500, a
    reset or a garbled answer), 20% of reads fail before reaching the server, and an agent (on the store directly)
    claims jobs as they come; the client tries each request once (its own retries would hide most faults). Every
    job in the store was reported (its id printed, exit 0 or 7), each command made
    at most one job, and a submit that exited 4 left none. Before: a job claimed before its lost answer was read
    back, or whose index entry's answer was lost, was 'cannot reach' (exit 4), no id, and it ran."""
    proxy.add(Rule("commit_then_lose", kinds=("create", "put"), rate=0.2))
    proxy.add(Rule("fail_before", kinds=("get",), rate=0.2))
    stado_env = env(**ONCE)
    agent = Agent(stado_env_direct, tmp_path, "--slots", "4")
    said = {}
    try:
        for n in range(50):
            got = stado(stado_env, "submit", f"echo {n}", ok=False, timeout=120)
            assert got.returncode in (0, 4, 7), got.stderr
            assert len(got.stderr.strip().splitlines()) <= 1, got.stderr
            said[n] = got
    finally:
        agent.stop()
    assert proxy.lost(kind="create") and proxy.lost(kind="put"), "no write lost its answer: the fault never fired"
    stored = jobs_in(direct)
    printed = {got.stdout.strip(): n for n, got in said.items() if got.returncode in (0, 7)}
    assert set(stored) <= set(printed), "a job in the store was never reported"
    for job, record in stored.items():
        assert record["spec"]["command"] == f"echo {printed[job]}"
    assert sorted(record["spec"]["command"] for record in stored.values()) == sorted(
        {record["spec"]["command"] for record in stored.values()}), "a command made two jobs"
    for n, got in said.items():
        if got.returncode == 0:
            assert got.stdout.strip() in stored
            assert got.stderr == "" or "agents find it on their slow pass" in got.stderr, got.stderr
        elif got.returncode == 4:
            assert got.stdout == "" and "nothing was submitted" in got.stderr
            assert f"echo {n}" not in {r["spec"]["command"] for r in stored.values()}
        else:
            assert f"could not tell whether job {got.stdout.strip()} was queued" in got.stderr


def test_a_keyed_submit_run_again_through_lost_answers_makes_one_job(env, proxy, direct):
    """Half of every create and plain write commits and loses its answer; the same `stado submit --key` run five
    times says one id each time it can tell, and the store holds one job."""
    proxy.add(Rule("commit_then_lose", kinds=("create", "put"), rate=0.5))
    stado_env = env()
    runs = [stado(stado_env, "submit", "--key", "build-42", "make all", ok=False, timeout=120) for _ in range(5)]
    assert proxy.lost(), "no write lost its answer: the fault never fired"
    assert all(run.returncode in (0, 7) for run in runs), [run.stderr for run in runs]
    assert len({run.stdout.strip() for run in runs}) == 1, [run.stdout for run in runs]
    [(job, record)] = jobs_in(direct).items()
    assert job == runs[0].stdout.strip() and record["spec"]["command"] == "make all"
    assert any(run.returncode == 0 for run in runs)


def test_a_submit_that_cannot_read_back_its_landed_create_says_it_cannot_tell(env, proxy, direct):
    """Every create commits and loses its answer, every read fails: past the bound the submit prints the id, says it
    could not tell (exit 7), and the job is there. Before: 'cannot reach' (exit 4), no id, the job queued."""
    proxy.add(Rule("commit_then_lose", kinds=("create",), answers=("503",)))
    proxy.add(Rule("fail_before", kinds=("get", "head", "list"), answers=("503",)))
    got = stado(env(**ONCE), "submit", "true", ok=False, timeout=120)
    assert got.returncode == 7, got.stderr
    job = got.stdout.strip()
    assert got.stderr.startswith(f"stado: could not tell whether job {job} was queued: ") and len(
        got.stderr.strip().splitlines()) == 1
    assert f"`stado status {job}` tells once the store answers" in got.stderr
    assert list(jobs_in(direct)) == [job]
    proxy.clear()
    assert json.loads(stado(env(), "status", job, "--json").stdout)["state"] == "queued"


def test_a_job_whose_index_entry_failed_is_queued_exit_0_and_an_agent_finds_it(env, proxy, direct, stado_env_direct,
                                                                                 tmp_path):
    proxy.add(Rule("fail_before", kinds=("put",), prefix=keys.READY, answers=("503",)))
    got = stado(env(**ONCE), "submit", "true", ok=False, timeout=120)
    job = got.stdout.strip()
    assert got.returncode == 0, got.stderr
    assert got.stderr.startswith(f"stado: job {job} is queued, but its entry in the claim-order index could not be "
                                 "written (") and "agents find it on their slow pass" in got.stderr
    assert list(jobs_in(direct)) == [job] and list(direct.list(keys.READY)) == []
    agent = run_until_idle(stado_env_direct, tmp_path)
    assert f"{job}: queued but missing from the claim-order index; indexed" in agent.log()
    assert jobs_in(direct)[job]["state"] == "completed"


def test_a_submit_that_never_reached_the_store_says_nothing_was_submitted(env, proxy, direct):
    proxy.close()  # nothing listens there now: every connection is refused
    got = stado(env(**ONCE), "submit", "true", ok=False)
    assert got.returncode == 4 and got.stdout == ""
    assert got.stderr.strip().endswith("nothing was submitted") and len(got.stderr.strip().splitlines()) == 1
    assert jobs_in(direct) == {}


def test_cancels_through_lost_answers_say_what_the_store_holds(env, proxy, direct):
    """Thirty in a hundred conditional writes (the tombstone, cancelled/, the conditional deletes) commit and lose their
    answer: a cancel that exits 0 left its job cancelled, 7 could not tell, 4 wrote nothing. Before: 'cannot reach
    the store' (exit 4) for cancels that had landed."""
    stado_env = env()
    ids = [stado(stado_env, "submit", f"sleep {n}").stdout.strip() for n in range(12)]
    proxy.add(Rule("commit_then_lose", kinds=("create", "cas"), rate=0.3))
    # Not garbled: a conditional delete goes through urllib (objectstore.cloud.send_conditional_delete), which lets
    # http.client's BadStatusLine out as a traceback, not as a store error.
    proxy.add(Rule("commit_then_lose", kinds=("delete_if_match",), rate=0.3, answers=("503", "500", "reset")))
    said = {job: stado(stado_env, "cancel", job, ok=False, timeout=120) for job in ids}
    assert proxy.lost(), "no write lost its answer: the fault never fired"
    proxy.clear()
    stored = jobs_in(direct)
    for job, got in said.items():
        assert got.returncode in (0, 4, 7), got.stderr
        state = stored[job]["state"] if job in stored else None
        where = sorted(k for k in (e.key for e in direct.list("")) if job in k and not k.startswith("ready/"))
        if got.returncode == 0:
            assert got.stdout.startswith(f"{job}: cancelled"), got.stdout
            assert keys.terminal("cancelled", job) in where or keys.running(job) in where, where
        elif got.returncode == 4:
            assert where == [keys.queued(job)] and "nothing was written" in got.stderr
        else:
            assert f"could not tell whether the cancel of {job} landed" in got.stderr
        assert state is not None
    assert any(got.returncode == 0 for got in said.values())


def test_a_cancel_in_a_storm_from_its_first_read_wrote_nothing_and_says_so(env, proxy, direct):
    job = stado(env(), "submit", "true").stdout.strip()
    proxy.storm(60)
    got = stado(env(**ONCE), "cancel", job, ok=False, timeout=120)
    proxy.calm()
    assert got.returncode == 4, got.stderr
    assert got.stderr.strip().endswith(f"nothing was written (the cancel of {job} was not sent)")
    assert [e.key for e in direct.list("") if job in e.key and not e.key.startswith("ready/")] == [keys.queued(job)]


def test_a_batch_prints_every_job_that_landed_and_names_the_one_it_cannot_tell_about(env, proxy, direct, tmp_path):
    """The first job lands; its index entry's answer is held back, and meanwhile the store turns bad: the second
    job's create commits and loses its answer and every read fails. stdout: both ids, in order; stderr: one line
    naming the second and saying the third was not submitted; exit 7; the store: the first two jobs."""
    import threading

    batch = tmp_path / "three.txt"
    batch.write_text("echo one\necho two\necho three\n")
    proxy.add(Rule("delay", kinds=("put",), prefix=keys.READY, delay=(1.0, 1.0), limit=1))

    def turn_bad():  # while the first index entry's answer is held back
        wait_for(lambda: any(e.key and e.key.startswith(keys.READY) for e in proxy.exchanges(kind="put")), 60,
                 message="the first job's index entry")
        proxy.add(Rule("commit_then_lose", kinds=("create",), answers=("503",)))
        proxy.add(Rule("fail_before", kinds=("get", "head", "list"), answers=("503",)))

    watcher = threading.Thread(target=turn_bad, daemon=True)
    watcher.start()
    got = stado(env(**ONCE), "submit", "--batch", str(batch), ok=False, timeout=120)
    watcher.join(5)
    assert got.returncode == 7, got.stderr
    first, second = got.stdout.split()
    assert got.stderr.startswith(f"stado: could not tell whether job {second} was queued: ")
    assert got.stderr.strip().endswith("(1 job(s) before it queued, their ids printed; the 1 after it not submitted)")
    assert len(got.stderr.strip().splitlines()) == 1
    stored = jobs_in(direct)
    assert sorted(stored) == sorted([first, second])
    assert stored[first]["spec"]["command"] == "echo one" and stored[second]["spec"]["command"] == "echo two"
