"""The end-to-end suite runs over every backend of tests/stado/conftest.py (file, s3, azure)."""
import pytest

from tests.helpers import kill_all, pids_with_marker

from ..storekit import StoreTarget
from ..throttle import ThrottledProxy


@pytest.fixture
def store(open_test_store):
    """The test's store, opened in this process (to look at or tamper with what the CLI wrote)."""
    return open_test_store()


@pytest.fixture(autouse=True)
def no_leftover_processes(tmp_path):
    """A failed test must not leave job shells running (their commands and work dirs name tmp_path)."""
    yield
    kill_all(pids_with_marker(str(tmp_path)))


@pytest.fixture
def slow(store_target, seaweedfs, make_stado_env, tmp_path):
    """(proxy, env(**options)): a throttling proxy in front of the test's SeaweedFS, and the environment of a
    `stado` that reaches the same store through it with extra STADO_CONFIG options."""
    proxy = ThrottledProxy.for_endpoint(seaweedfs.endpoint)
    made = []

    def env(**options) -> dict:
        target = StoreTarget("s3", store_target.url, {**store_target.options, "endpoint": proxy.endpoint, **options},
                             store_target.env)
        made.append(target)
        return make_stado_env(target, tmp_path / f"slow-env-{len(made)}")

    yield proxy, env
    proxy.close()
