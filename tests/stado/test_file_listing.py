"""The local-directory store's list pages: names remembered while a directory is at rest, never a stale page."""
import os

from stado.objectstore import open_store


def _age(store, prefix: str, seconds: float = 5.0) -> None:
    """Make the directory look unmodified for a while (as a queue at rest is)."""
    path = os.path.join(store.root, "objects", prefix)
    old = os.stat(path).st_mtime_ns - int(seconds * 1e9)
    os.utime(path, ns=(old, old))


def test_a_page_of_a_directory_at_rest_is_remembered_and_a_change_is_seen(tmp_path):
    store = open_store(f"file://{tmp_path}/store")
    for n in range(50):
        store.put(f"ready/{n:04d}-job", b"x")
    _age(store, "ready")
    first = [e.key for e in store.list_page("ready/", limit=10)]
    assert first == [f"ready/{n:04d}-job" for n in range(10)]
    assert "ready/" in store._quiet_names  # remembered: the directory was at rest
    assert [e.key for e in store.list_page("ready/", start_after="ready/0045-job", limit=10)] == \
        [f"ready/{n:04d}-job" for n in range(46, 50)]
    store.put("ready/0000-aaa", b"new")  # the directory changes: its page is read again
    store.delete("ready/0001-job")
    again = [e.key for e in store.list_page("ready/", limit=3)]
    assert again == ["ready/0000-aaa", "ready/0000-job", "ready/0002-job"]


def test_a_directory_changed_within_the_last_second_is_never_remembered(tmp_path):
    store = open_store(f"file://{tmp_path}/store")
    store.put("ready/a", b"x")
    store.list_page("ready/")
    assert "ready/" not in store._quiet_names  # its mtime is too fresh to prove nothing changed since


def test_an_entry_deleted_after_the_names_were_read_is_skipped_not_returned(tmp_path):
    store = open_store(f"file://{tmp_path}/store")
    for n in range(5):
        store.put(f"ready/{n}", b"x")
    _age(store, "ready")
    store.list_page("ready/")
    remembered = store._quiet_names["ready/"][0]
    os.unlink(os.path.join(store.root, "objects", "ready", "2"))  # behind the store's back: mtime changes...
    path = os.path.join(store.root, "objects", "ready")
    os.utime(path, ns=(remembered, remembered))  # ...and is set back, as if the change had left it as it was
    page = [e.key for e in store.list_page("ready/", limit=4)]
    assert page == ["ready/0", "ready/1", "ready/3", "ready/4"]
