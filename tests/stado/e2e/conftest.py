"""The end-to-end suite runs over every backend of tests/stado/conftest.py (file, s3, azure)."""
import pytest

from tests.helpers import kill_all, pids_with_marker


@pytest.fixture
def store(open_test_store):
    """The test's store, opened in this process (to look at or tamper with what the CLI wrote)."""
    return open_test_store()


@pytest.fixture(autouse=True)
def no_leftover_processes(tmp_path):
    """A failed test must not leave job shells running (their commands and work dirs name tmp_path)."""
    yield
    kill_all(pids_with_marker(str(tmp_path)))
