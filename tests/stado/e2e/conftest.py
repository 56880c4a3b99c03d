"""The end-to-end suite runs over every backend of tests/stado/conftest.py (file, s3, azure)."""
import pytest


@pytest.fixture
def store(open_test_store):
    """The test's store, opened in this process (to look at or tamper with what the CLI wrote)."""
    return open_test_store()
