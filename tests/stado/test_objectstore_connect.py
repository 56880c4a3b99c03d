"""Choosing a store: URLs, STADO_CONFIG, the per-user default, one-line errors, lean imports."""
import os
import subprocess
import sys
import time

import pytest

from stado.objectstore import ConfigError, StoreError, StoreUnavailable, open_store, store_from_environment
from stado.objectstore.file import FileStore
from stado.objectstore.memory import MemoryStore


def one_line_error(call) -> str:
    with pytest.raises(ConfigError) as caught:
        call()
    message = str(caught.value)
    assert message and "\n" not in message
    return message


@pytest.mark.parametrize("url, words", [
    ("queue", "no scheme"),
    ("ftp://host/q", "unknown store scheme"),
    ("file://relative/path", "absolute path"),
    ("s3://", "names no bucket"),
    ("az:///prefix", "names no bucket"),
    ("memory://name/path", "takes a name"),
])
def test_bad_urls(url, words):
    assert words in one_line_error(lambda: open_store(url))


@pytest.mark.parametrize("url, options, words", [
    ("s3://b/p", {"endpoint": 5}, "endpoint must be a URL"),
    ("s3://b/p", {"endpoint": "not a url"}, "endpoint must be a URL"),
    ("s3://b/p", {"endpoint": "ftp://127.0.0.1:8333"}, "endpoint must be a URL"),
    ("s3://b/p", {"endpoint": "http://127.0.0.1:99999"}, "endpoint must be a URL"),
    ("s3://b/p", {"endpoint": "http:// 127.0.0.1"}, "endpoint must be a URL"),
    ("az://c/p", {"endpoint": "http://"}, "endpoint must be a URL"),
    ("gs://b/p", {"endpoint": ["http://x"]}, "endpoint must be a URL"),
    ("s3://b/p", {"region": 5}, "region must be text"),
    ("s3://b/p", {"virtual_hosted_style": "yes"}, "virtual_hosted_style must be true or false"),
    ("s3://b/p", {"allow_http": 1}, "allow_http must be true or false"),
    ("az://c/p", {"emulator": "true"}, "emulator must be true or false"),
    ("az://c/p", {"account": 7}, "account must be text"),
    ("s3://b/p", {"max_retries": -1}, "max_retries"),
    ("s3://b/p", {"max_retries": 1.5}, "max_retries"),
    ("s3://b/p", {"timeout": "soon"}, "timeout"),
    ("s3://b/p", {"connect_timeout": 0}, "connect_timeout"),
    ("s3://b/p", {"retry_timeout": True}, "retry_timeout"),
])
def test_option_types_and_endpoint_shape_are_checked_at_open(url, options, words):
    assert words in one_line_error(lambda: open_store(url, options, env={}))


@pytest.mark.parametrize("endpoint", ["5", '"not a url"'])
def test_a_bad_endpoint_in_stado_config_is_one_line_bad_input(tmp_path, endpoint):
    config = tmp_path / "stado.toml"
    config.write_text(f'[store]\nurl = "s3://b/p"\nendpoint = {endpoint}\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "STADO_"))}
    done = subprocess.run([os.path.join(os.path.dirname(sys.executable), "stado"), "status"],
                          env={**env, "STADO_CONFIG": str(config), "AWS_ACCESS_KEY_ID": "a",
                               "AWS_SECRET_ACCESS_KEY": "b"}, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("stado: ") and "endpoint must be a URL" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_a_panic_inside_obstore_is_a_one_line_store_error():
    """Should anything still reach obstore in a shape that makes its Rust code panic, the panic (a
    BaseException from pyo3) becomes a StoreError rather than a traceback."""
    from obstore.store import S3Store

    from stado.objectstore.cloud import CloudStore

    raw = S3Store("b", endpoint="not a url", access_key_id="a", secret_access_key="b")  # bypasses open_store's check
    store = CloudStore("s3://b", "s3", raw)
    for call in (lambda: store.get("k"), lambda: store.put("k", b"x"), lambda: list(store.list("")),
                 lambda: store.put_if_absent("k", b"x"), lambda: store.delete("k")):
        with pytest.raises(StoreError) as caught:
            call()
        assert "\n" not in str(caught.value) and "internal error in the object-store client" in str(caught.value)
        assert type(caught.value.__cause__).__name__ == "PanicException"  # the cause is kept for a traceback


def test_every_cloud_error_keeps_obstore_s_as_its_cause():
    """One translation (cloud_errors.Translated) for every call into obstore: the store's error says it in one line, and
    obstore's own exception stays attached as its cause."""
    from obstore.exceptions import BaseError

    options = {"endpoint": "http://127.0.0.1:1", "max_retries": 0, "retry_timeout": 2, "connect_timeout": 1,
               "allow_http": True}
    store = open_store("s3://b/p", options, env={"AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "b"})
    for call in (lambda: store.get("k"), lambda: store.head("k"), lambda: store.get_range("k", 0, 5),
                 lambda: store.put("k", b"x"), lambda: store.put_if_absent("k", b"x"),
                 lambda: store.put_if_match("k", b"x", store_version()), lambda: list(store.list("")),
                 lambda: store.list_page(""), lambda: store.delete("k")):
        with pytest.raises(StoreUnavailable) as caught:
            call()
        assert "\n" not in str(caught.value) and "cannot reach" in str(caught.value)
        assert isinstance(caught.value.__cause__, BaseError), repr(caught.value.__cause__)


def store_version():
    from stado.objectstore.base import Version

    return Version('"etag"', None)


def test_unknown_and_misplaced_options():
    assert "unknown option(s) colour" in one_line_error(lambda: open_store("s3://b/p", {"colour": "red"}))
    assert "emulator" in one_line_error(lambda: open_store("s3://b/p", {"emulator": True}))
    assert "take no options" in one_line_error(lambda: open_store("file:///tmp/x", {"endpoint": "http://x"}))
    assert "seconds" in one_line_error(lambda: open_store("s3://b/p", {"timeout": "soon"}))


def test_memory_names_are_shared_in_process_and_anonymous_stores_are_not():
    a, b = open_store("memory://shared-test"), open_store("memory://shared-test")
    a.put("k", b"v")
    assert b.get("k").data == b"v"
    assert isinstance(open_store("memory://"), MemoryStore)
    assert open_store("memory://") is not open_store("memory://")


def test_default_store_is_a_per_user_directory(tmp_path):
    store = store_from_environment({"XDG_DATA_HOME": str(tmp_path / "data"), "HOME": str(tmp_path / "home")})
    assert isinstance(store, FileStore) and store.root == str(tmp_path / "data" / "stado" / "store")
    store = store_from_environment({"XDG_DATA_HOME": "relative/ignored", "HOME": str(tmp_path / "home")})
    assert store.root == str(tmp_path / "home" / ".local" / "share" / "stado" / "store")
    assert oct(os.stat(store.root).st_mode & 0o777) == "0o700"


def config_error(tmp_path, text: str | None) -> str:
    path = tmp_path / "stado.toml"
    if text is not None:
        path.write_text(text)
    message = one_line_error(lambda: store_from_environment({"STADO_CONFIG": str(path), "HOME": str(tmp_path)}))
    assert str(path) in message or "scheme" in message
    return message


def test_config_errors_name_the_file_and_the_fix(tmp_path):
    assert "does not exist" in config_error(tmp_path, None)
    assert "not valid TOML" in config_error(tmp_path, "[store\nurl = 1")
    assert "needs a [store] table" in config_error(tmp_path, "[other]\nurl = 's3://b'\n")
    assert "needs a [store] table" in config_error(tmp_path, "[store]\nurl = 3\n")
    assert "unknown store scheme" in config_error(tmp_path, "[store]\nurl = 'ftp://b/q'\n")
    assert "environment variables" in config_error(
        tmp_path, "[store]\nurl = 's3://b/q'\nsecret_access_key = 'no'\n")


def test_config_selects_a_file_store(tmp_path):
    (tmp_path / "stado.toml").write_text(f'[store]\nurl = "file://{tmp_path}/fleet"\n')
    store = store_from_environment({"STADO_CONFIG": str(tmp_path / "stado.toml")})
    assert isinstance(store, FileStore) and store.root == f"{tmp_path}/fleet"


PROBE = """
import json, sys
from stado.objectstore import StoreError, store_from_environment
store = store_from_environment()
try:
    store.put_if_absent("queue/from-subprocess.json", b"{}")
    print(json.dumps({"keys": [e.key for e in store.list("queue")], "obstore": any(m.startswith("obstore") for m in sys.modules)}))
except StoreError as exc:
    print(f"{type(exc).__name__}: {exc}")
"""


def run_probe(env) -> str:
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_stado_env_reaches_the_store_from_a_subprocess(store_target, stado_env):
    import json

    out = json.loads(run_probe(stado_env))
    assert out["keys"] == ["queue/from-subprocess.json"]
    assert out["obstore"] is (store_target.backend != "file")
    assert store_target.open().get("queue/from-subprocess.json").data == b"{}"


@pytest.mark.parametrize("store_target", ["s3", "azure"], indirect=True)
def test_subprocess_with_wrong_credentials_gets_one_line_access_denied(store_target, stado_env):
    secret = "AWS_SECRET_ACCESS_KEY" if store_target.backend == "s3" else "AZURE_STORAGE_ACCOUNT_KEY"
    out = run_probe({**stado_env, secret: "d3JvbmcgLSB0ZXN0aW5nIG9ubHk="})
    assert out.startswith("AccessDenied: ") and secret.split("_")[0] in out and "\n" not in out
    assert list(store_target.open().list("")) == []


def test_no_config_imports_neither_obstore_nor_tomllib(tmp_path):
    code = ("import sys; from stado.objectstore import store_from_environment as s; "
            f"s({{'XDG_DATA_HOME': {str(tmp_path)!r}}}).put('k', b'v'); "
            "print(sorted(m for m in sys.modules if m.startswith(('obstore', 'tomllib', 'urllib.parse', 'hashlib'))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "[]", done.stderr


def test_open_of_an_unwritable_root_is_one_line(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(StoreError) as caught:
        open_store(f"file://{blocker}/store")
    assert "\n" not in str(caught.value) and "writable" in str(caught.value)


def test_file_store_keeps_locks_and_temporaries_out_of_listings(tmp_path):
    store = open_store(f"file://{tmp_path}/s")
    store.put_if_absent("queue/j1.json", b"1")
    store.put("status/j1/output/0001", b"2")
    store.delete("status/j1/output/0001")
    assert [entry.key for entry in store.list("")] == ["queue/j1.json"]
    assert sorted(os.listdir(tmp_path / "s")) == ["locks", "objects", "tmp", "wake"]
    assert os.listdir(tmp_path / "s" / "objects") == ["queue"]  # emptied directories are pruned
    assert os.listdir(tmp_path / "s" / "locks")


def test_file_store_sweeps_temporaries_left_by_a_dead_writer(tmp_path):
    open_store(f"file://{tmp_path}/s")
    stale, fresh = tmp_path / "s" / "tmp" / ".tmp.1.dead", tmp_path / "s" / "tmp" / ".tmp.2.live"
    stale.write_bytes(b"half")
    fresh.write_bytes(b"in flight")
    two_hours_ago = time.time() - 7200
    os.utime(stale, (two_hours_ago, two_hours_ago))
    open_store(f"file://{tmp_path}/s")
    assert not stale.exists() and fresh.exists()


def test_file_store_os_failure_is_one_line_store_unavailable(tmp_path):
    store = open_store(f"file://{tmp_path}/s")
    os.rmdir(tmp_path / "s" / "tmp")
    (tmp_path / "s" / "tmp").write_text("not a directory any more")
    with pytest.raises(StoreUnavailable) as caught:
        store.put("queue/j1.json", b"x")
    assert "\n" not in str(caught.value) and "failed to put 'queue/j1.json'" in str(caught.value)
    assert list(store.list("")) == []


@pytest.mark.parametrize("url, hint", [("s3://b/p", "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"),
                                       ("gs://b/p", "GOOGLE_APPLICATION_CREDENTIALS"),
                                       ("az://c/p", "AZURE_STORAGE_ACCOUNT_NAME and AZURE_STORAGE_ACCOUNT_KEY")])
def test_no_credentials_is_said_as_such_not_as_a_refusal(url, hint):
    """With no credentials in the environment obstore asks the metadata service of a cloud machine; that
    failing is not the endpoint refusing anything (the endpoint here does not even listen)."""
    from stado.objectstore import AccessDenied

    options = {"endpoint": "http://127.0.0.1:1", "max_retries": 0, "retry_timeout": 2, "connect_timeout": 1,
               "allow_http": True}
    if url.startswith("az://"):
        options["account"] = "acct"
    store = open_store(url, options, env={})
    with pytest.raises(AccessDenied) as caught:
        list(store.list(""))
    message = str(caught.value)
    assert message.startswith(f"no credentials found for {url}") and f"set {hint}" in message, message
    assert "refused" not in message and "\n" not in message


def test_an_azure_store_without_an_account_says_what_to_set():
    message = one_line_error(lambda: open_store("az://c/p", {"endpoint": "http://127.0.0.1:1", "allow_http": True}, env={}))
    assert "no storage account" in message and "AZURE_STORAGE_ACCOUNT_NAME" in message


@pytest.mark.parametrize("url, options, env", [
    ("s3://b/p", {"endpoint": "http://127.0.0.1:8333"}, {}),
    ("s3://b/p", {"endpoint": "HTTP://127.0.0.1:8333", "allow_http": False}, {}),
    ("s3://b/p", {}, {"AWS_ENDPOINT_URL": "http://127.0.0.1:8333"}),
    ("az://c/p", {"endpoint": "http://127.0.0.1:10000/devstoreaccount1", "account": "acct"}, {}),
    ("gs://b/p", {"endpoint": "http://127.0.0.1:4443"}, {}),
])
def test_a_plain_http_endpoint_is_refused_without_allow_http(url, options, env):
    """As docs/stado.md says: allow_http is what allows a plain-HTTP endpoint (and nothing else: a plain-HTTP endpoint without it is refused)."""
    message = one_line_error(lambda: open_store(url, options, env=env))
    assert "is plain HTTP" in message and "allow_http = true" in message
    assert ("AWS_ENDPOINT_URL" if env else "endpoint") in message
    allowed = open_store(url, {**options, "allow_http": True}, env=env)  # the same, allowed: opens
    allowed.close()


def test_azurite_s_emulator_setting_allows_its_plain_http_endpoint():
    open_store("az://c/p", {"emulator": True}, env={}).close()


@pytest.mark.parametrize("url", ["file:///tmp/stado-q?y=1", "file:///tmp/stado-q#f", "s3://b/p?versionId=1",
                                 "az://c/p#x", "memory://n?x"])
def test_a_store_url_with_a_query_or_fragment_is_refused(url, tmp_path):
    assert "has a query or fragment" in one_line_error(lambda: open_store(url, env={}))
    assert not os.path.exists("/tmp/stado-q?y=1") and not os.path.exists("/tmp/stado-q#f")


def test_a_credential_variable_that_is_not_utf8_is_one_line():
    message = one_line_error(lambda: open_store("s3://b/p", {"endpoint": "https://s3.example.com"},
                                                env={"AWS_ACCESS_KEY_ID": "a\udcff", "AWS_SECRET_ACCESS_KEY": "b"}))
    assert message == "AWS_ACCESS_KEY_ID holds bytes that are not UTF-8: fix or unset it"


def test_only_a_client_that_can_make_no_tls_connection_skips_the_ca_certificates():
    """Loading the system's CA certificates is skipped (the client told not to verify) only where no TLS
    connection can happen: a plain-HTTP endpoint with credentials given, so no token service is asked."""
    from stado.objectstore.cloudconfig import _no_tls_ever

    keys = {"access_key_id": "k", "secret_access_key": "s"}
    assert _no_tls_ever("s3", "http://127.0.0.1:8333", keys)
    assert _no_tls_ever("s3", "HTTP://seaweed.lan", keys)
    assert not _no_tls_ever("s3", "https://s3.example.com", keys)
    assert not _no_tls_ever("s3", None, keys)                                   # AWS itself: https
    assert not _no_tls_ever("s3", "http://127.0.0.1:8333", {"access_key_id": "k"})  # the chain may ask STS
    assert not _no_tls_ever("s3", "http://127.0.0.1:8333", {})
    assert _no_tls_ever("azure", "http://127.0.0.1:10000/acct", {"account_key": "a2V5"})
    assert _no_tls_ever("azure", "http://127.0.0.1:10000/acct", {"sas_key": "sv=1"})
    assert not _no_tls_ever("azure", "http://127.0.0.1:10000/acct", {})           # managed identity: https
    assert not _no_tls_ever("gcs", "http://127.0.0.1:4443", {"service_account_key": "{}"})


CLOUD_IMPORTS = """
import sys
from stado.objectstore import store_from_environment
store = store_from_environment()
store.put_if_absent("queue/imports.json", b"{}")
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("obstore", "typing", "re", "enum"))
import json  # (json imports re: only now)
import obstore, obstore.store  # the package wraps the module already loaded, as for any later user
print(json.dumps({"loaded": loaded, "same": obstore._obstore is sys.modules["obstore._obstore"],
                  "read": bytes(obstore.get(store._store, "queue/imports.json").bytes()).decode()}))
"""


@pytest.mark.parametrize("store_target", ["s3", "azure"], indirect=True)
def test_a_cloud_store_loads_obstore_s_native_module_alone(store_target, stado_env):
    """The store's client comes from obstore's native module, loaded without the package's typed wrappers (and the
    typing, re and enum they import: 5-7 ms of every cloud command); obstore imported later wraps that module."""
    import json

    done = subprocess.run([sys.executable, "-c", CLOUD_IMPORTS], env=stado_env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["loaded"] == ["obstore._obstore", "obstore._store", "obstore.exceptions"]
    assert out["same"] is True and out["read"] == "{}"
