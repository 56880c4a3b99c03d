"""What the agent says after an answer it lost: the line matches what the store holds. A real agent on a real
in-memory store (tests/stado/inprocess.py), with one answer lost on the way back."""
from stado.core import keys
from stado.queue import submission
from stado.queue.lookup import view
from stado.objectstore.base import ObjectStore, StoreUnavailable
from stado.core.spec import JobSpec

from .inprocess import World


class LosesDeleteAnswer(ObjectStore):
    """The first conditional delete of a running record lands, and its answer is lost."""

    def __init__(self, inner: ObjectStore):
        self.inner, self.url, self.lost = inner, inner.url, False

    def delete_if_match(self, key, version):
        removed = self.inner.delete_if_match(key, version)
        if key.startswith(keys.RUNNING) and not self.lost:
            self.lost = True
            raise StoreUnavailable(f"connection reset after deleting {key} (test)")
        return removed

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def get(self, key):
        return self.inner.get(key)

    def put(self, key, data):
        return self.inner.put(key, data)

    def put_if_absent(self, key, data):
        return self.inner.put_if_absent(key, data)

    def put_if_match(self, key, data, version):
        return self.inner.put_if_match(key, data, version)

    def delete(self, key):
        return self.inner.delete(key)

    def list(self, prefix):
        return self.inner.list(prefix)


def test_a_settle_whose_last_answer_was_lost_says_what_it_recorded(tmp_path):
    world = World(tmp_path)
    world.store = store = LosesDeleteAnswer(world.store)
    world.agent()
    job = submission.submit(store, [submission.Submission(JobSpec(command="run 1 exit 0"))],
                            clock=world.clock)[0]["id"]
    world.run_until(lambda: view(store, job).state == "completed" and not world.agents[0].slots)
    log = world.log()
    assert store.lost and "nothing recorded" not in log, log
    assert f"{job}: -> completed (recorded by an earlier try of this settle)" in log, log
