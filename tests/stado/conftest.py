"""Fixtures for stado's object-store backends: real servers on 127.0.0.1, a fresh prefix per test.

Servers (session-scoped, started on first use, once per pytest process or xdist worker, on free
ports; a test that needs one FAILS, never skips, when it is missing or does not start):

    seaweedfs -> servers.SeaweedFS   .endpoint .bucket .region .access_key .secret_key
                                     .options (dict for open_store) .env (AWS_* credentials)
    azurite   -> servers.Azurite     .endpoint .container .options .env (AZURE_STORAGE_*)

Per test, parametrised over ["file", "s3", "azure"] (ids file / s3 / azure):

    store_target    -> storekit.StoreTarget(backend, url, options, env), a fresh empty prefix
                       (file: a new directory). .open() -> ObjectStore.
    store_url       -> str, store_target.url, e.g. "s3://stado/t-1a2b3c4d5e6f"
    store_options   -> dict, store_target.options (non-secret: endpoint, region, ...)
    open_test_store -> callable () -> ObjectStore on store_target (closed after the test)
    stado_env       -> dict[str, str]: the environment for a `stado ...` subprocess on store_target:
                       STADO_CONFIG (a TOML file in tmp_path), the backend's credential variables,
                       XDG_DATA_HOME under tmp_path; inherited AWS_/AZURE_/GOOGLE_/STADO_ removed.

Choose backends for one test with indirect parametrisation:

    @pytest.mark.parametrize("store_target", ["file"], indirect=True)
    def test_something(stado_env): subprocess.run(["stado", "status"], env=stado_env, ...)

`make_stado_env(target, directory)` (a fixture returning a function) does the same for any
StoreTarget, e.g. one built with storekit.make_target for a second backend in the same test.
"""
import pytest

from . import servers
from .storekit import BACKENDS, StoreTarget, make_target, server_for

_started: dict[str, float] = {}


def _start(kind: str, tmp_path_factory, start):
    try:
        server = start(tmp_path_factory.mktemp(kind))
    except servers.ServerError as exc:
        failure = f"{kind} did not start: {exc}"
    else:
        _started[kind] = server.start_seconds
        return server
    pytest.fail(failure, pytrace=False)


@pytest.fixture(scope="session")
def seaweedfs(tmp_path_factory):
    server = _start("seaweedfs", tmp_path_factory, servers.start_seaweedfs)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def azurite(tmp_path_factory):
    server = _start("azurite", tmp_path_factory, servers.start_azurite)
    yield server
    server.stop()


@pytest.fixture(params=BACKENDS)
def store_target(request, tmp_path) -> StoreTarget:
    return make_target(request.param, tmp_path, server_for(request, request.param))


@pytest.fixture
def store_url(store_target) -> str:
    return store_target.url


@pytest.fixture
def store_options(store_target) -> dict:
    return store_target.options


@pytest.fixture
def open_test_store(store_target):
    opened = []

    def open_():
        store = store_target.open()
        opened.append(store)
        return store

    yield open_
    for store in opened:
        store.close()


@pytest.fixture
def make_stado_env(tmp_path):
    def make(target: StoreTarget, directory=None) -> dict[str, str]:
        return target.subprocess_env(directory or tmp_path / f"stado-env-{target.backend}")
    return make


@pytest.fixture
def stado_env(store_target, make_stado_env) -> dict[str, str]:
    return make_stado_env(store_target)


def pytest_terminal_summary(terminalreporter):
    if _started:
        started = ", ".join(f"{kind} ready in {seconds:.2f} s" for kind, seconds in sorted(_started.items()))
        terminalreporter.write_line(f"object-store servers: {started}")
