"""What the dashboards read, without a browser: jobman.ui.reads' pages (server-side filters, search, paging, the
graph and timeline of a page) on a real home, and stado.ui.reads' claim order, unschedulable reasons, search and
paging on a real local-directory store, with the order checked against the agents' own claim order."""
from runkit.core.clock import SYSTEM
import json
import time

import pytest

from jobman.ui import reads as jobman_board
from jobman.core.errors import BadInput as JobmanBadInput
from stado.ui import reads as stado_board
from stado.core import keys
from stado.queue import submission
from stado.core.errors import BadInput as StadoBadInput
from stado.objectstore.connect import open_store
from stado.core.spec import JobSpec


def test_jobman_pages_filter_search_and_carry_their_graph_and_attempts(jobman):
    first = jobman.run("sh", "-c", "exit 2", opts=["--name", "extract", "--retries", "1", "--retry-delay", "0.1s"])
    second = jobman.run("echo", "needle-in-command", opts=["--name", "load", "--after", "extract"])
    jobman.wait_finished(second)
    others = [jobman.run("true", opts=["--name", f"other-{n}"]) for n in range(5)]
    for job in others:
        jobman.wait_finished(job)
    st = jobman_board.open_home(jobman.env)
    page = jobman_board.page(st, limit=3)
    assert page["total"] == 7 and [v["name"] for v in page["jobs"]] == ["other-4", "other-3", "other-2"]
    assert jobman_board.page(st, offset=6, limit=3)["jobs"][0]["id"] == first
    assert page["counts"]["succeeded"] == 6 and page["counts"]["failed"] == 1
    failed = jobman_board.page(st, states=["failed"])
    assert [v["id"] for v in failed["jobs"]] == [first]
    # the graph of a page holds the jobs at the other end of its edges (not in view), the timeline every attempt
    assert {n["id"]: n["in_view"] for n in failed["graph"]["nodes"]} == {first: True, second: False}
    assert failed["graph"]["edges"] == [{"from": first, "to": second, "condition": "end"}]
    [row] = failed["timeline"]
    assert [a["outcome"] for a in row["attempts"]] == ["failed", "failed"] and len(row["retry_delays"]) == 1
    assert [v["id"] for v in jobman_board.page(st, search="needle")["jobs"]] == [second]  # the command
    assert [v["id"] for v in jobman_board.page(st, search="#2")["jobs"]] == [second]      # the handle
    assert [v["id"] for v in jobman_board.page(st, search=first[:30])["jobs"]] == [first]  # an id prefix
    assert jobman_board.page(st, search="100%_")["total"] == 0  # LIKE's wildcards are the user's text
    assert jobman_board.page(st, name="other-*", group="default")["total"] == 5
    with pytest.raises(JobmanBadInput, match="unknown state 'finishd'"):
        jobman_board.page(st, states=["finishd"])
    with pytest.raises(JobmanBadInput):
        jobman_board.page(st, limit=0)
    watch = jobman_board.Watch(reconcile_every=60)
    before = watch(st, 0.0)
    assert watch(st, 1.0) == before  # nothing written: the same, from data_version alone
    jobman("group", "set", "gpu", "--limit", "2", check=True)
    assert watch(st, 2.0) != before
    assert [g["name"] for g in jobman_board.groups(st)] == ["default", "gpu"]


def test_a_jobs_page_opens_on_the_newest_mib_of_a_long_log(jobman):
    job = jobman.run("sh", "-c", "head -c 1500000 /dev/zero | tr '\\0' x; echo; echo last line",
                     opts=["--name", "chatty"])
    jobman.wait_finished(job)
    st = jobman_board.open_home(jobman.env)
    got = jobman_board.output_since(st, job, (0, 0))
    text = b"".join(data for _, data in got["pieces"])
    skipped = 1_500_011 - jobman_board.LOG_FIRST
    assert text.startswith(f"[jobman: {skipped} bytes of earlier output not shown here; jobman logs {job} "
                           "shows them]\n".encode())
    assert text.endswith(b"x\nlast line\n") and len(text) < jobman_board.LOG_FIRST + 200
    assert got["done"] and got["after"] == (1, 1_500_011)
    assert jobman_board.output_since(st, job, got["after"])["pieces"] == []  # nothing new: nothing again


def test_stado_queue_in_claim_order_with_reasons_search_and_paging(tmp_path):
    store = open_store(f"file://{tmp_path / 'store'}", {})
    try:
        specs = [JobSpec("true", name="low-old"), JobSpec("true", name="high", priority=5),
                 JobSpec("true", name="low-new"), JobSpec("true", name="gpu-job", capabilities=("gpu",)),
                 JobSpec("true", name="urgent", priority=9)]
        ids = {}
        for spec in specs:
            ids[spec.name] = submission.submit(store, [submission.Submission(spec)], clock=SYSTEM)[0]["id"]
        # an agent's record, as a live agent writes it: no gpu
        store.put(keys.agent("a1"), json.dumps({"agent": "a1", "instance_ref": "local@h1", "slots": 1, "cores": 2,
                                                "capabilities": [], "last_seen": _iso(time.time()),
                                                "live_for": 30}).encode())
        # a queue entry the claim-order index lacks (a submit that crashed between its two writes) keeps its place
        store.delete(keys.ready(5, ids["high"]))
        b = stado_board.board(store, now=time.time())
        order = [r["name"] for r in b["queue"]["jobs"]]
        assert order == ["urgent", "high", "low-old", "low-new", "gpu-job"]
        assert [r["place"] for r in b["queue"]["jobs"]] == [0, 1, 2, 3, 4]
        reasons = {r["name"]: r["unschedulable"] for r in b["queue"]["jobs"]}
        assert reasons["gpu-job"] == "local@h1: needs capabilities gpu" and reasons["low-old"] is None
        page = stado_board.board(store, offset=1, limit=2, now=time.time())
        assert [r["name"] for r in page["queue"]["jobs"]] == ["high", "low-old"] and page["queue"]["total"] == 5
        assert [r["name"] for r in stado_board.board(store, search="LOW", now=time.time())["queue"]["jobs"]] == ["low-old", "low-new"]
        assert [r["name"] for r in stado_board.board(store, search=ids["urgent"][:30], now=time.time())["queue"]["jobs"]] == ["urgent"]
        with pytest.raises(StadoBadInput):
            stado_board.board(store, limit=501, now=time.time())
        before = stado_board.fingerprint(store)
        from stado.queue import pause

        pause.pause(store, reason="maintenance", now=time.time())
        assert stado_board.fingerprint(store) != before
        assert stado_board.board(store, now=time.time())["paused"]["reason"] == "maintenance"

        # the two-tier watch: its first look is whole; then a new job is seen by a scan of the queue's names, and a
        # change to a queued record (here: a rewrite in place) by the full listings when poked (or when due)
        watch = stado_board.Watch(share=0.0001)  # the full listings are due only after minutes
        first = watch(store, 0.0)
        assert watch(store, 1.0) == first
        newer = submission.submit(store, [submission.Submission(JobSpec("true", name="newest"))], clock=SYSTEM)[0]["id"]
        second = watch(store, 2.0)
        assert second != first and watch.newest == keys.queued(newer)
        store.put(keys.queued(ids["low-old"]), store.get(keys.queued(ids["low-old"])).data)
        assert watch(store, 3.0) == second  # not due yet, and no new name
        assert watch(store, 4.0, poked=True) != second
    finally:
        store.close()


def _iso(t: float) -> str:
    from stado.core.documents import iso

    return iso(t)
