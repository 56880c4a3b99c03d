"""The local directory store prunes the directories a delete leaves empty; a writer making the same directories at
that moment must never fail for it (eight agents probing control/probe/ at their start did)."""
import multiprocessing
import os

from stado.objectstore import open_store


def _churn(url: str, me: int, rounds: int, errors) -> None:
    store = open_store(url)
    try:
        for n in range(rounds):
            key = f"control/probe/{me}-{n}"  # two levels, both left empty by each delete
            store.put_if_absent(key, b"x")
            store.delete(key)
    except Exception as e:  # the child reports; the test asserts
        errors.put(f"{type(e).__name__}: {e}")


def test_creates_race_the_pruning_of_empty_directories(tmp_path):
    url = f"file://{tmp_path}/store"
    open_store(url).put("seed", b"")
    errors = multiprocessing.get_context("fork").Queue()
    workers = [multiprocessing.get_context("fork").Process(target=_churn, args=(url, me, 1500, errors))
               for me in range(8)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(120)
    found = []
    while not errors.empty():
        found.append(errors.get())
    assert found == [] and [w.exitcode for w in workers] == [0] * 8
    assert not os.path.exists(tmp_path / "store" / "objects" / "control")  # every probe's directories went too
