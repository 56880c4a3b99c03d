"""Test-side handles on a store: where it is, how to open it, and how a `stado` subprocess reaches it.

Kept out of conftest.py so that spawned worker processes can import it (and the race workers)
without pytest.
"""
import json
import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from stado.objectstore import AlreadyExists, NotFound, ObjectStore, StoreUnavailable, open_store

BACKENDS = ("file", "s3", "azure")
# Inherited settings that would point a subprocess at some other store or credentials.
_FOREIGN_ENV_PREFIXES = ("AWS_", "AZURE_", "GOOGLE_", "STADO_")


@dataclass
class StoreTarget:
    """A fresh, empty place in one backend: `url` (with a per-test prefix), non-secret `options`,
    and `env`, the credential variables for it (nothing else)."""

    backend: str
    url: str
    options: dict = field(default_factory=dict)
    env: dict = field(default_factory=dict)

    def open(self) -> ObjectStore:
        return open_store(self.url, self.options, env=self.env)

    def config_toml(self) -> str:
        lines = ["[store]", f"url = {json.dumps(self.url)}"]
        lines += [f"{key} = {json.dumps(value)}" for key, value in sorted(self.options.items())]
        return "\n".join(lines) + "\n"

    def subprocess_env(self, directory: Path, base: dict | None = None) -> dict[str, str]:
        """Write `directory`/stado.toml and return the full environment for a `stado ...` subprocess:
        `base` (default os.environ) without inherited AWS_/AZURE_/GOOGLE_/STADO_ settings, plus
        STADO_CONFIG, the credentials, and XDG_DATA_HOME inside `directory` so nothing touches ~."""
        directory.mkdir(parents=True, exist_ok=True)
        config = directory / "stado.toml"
        config.write_text(self.config_toml())
        env = {k: v for k, v in (os.environ if base is None else base).items()
               if not k.startswith(_FOREIGN_ENV_PREFIXES)}
        env.update(self.env)
        env["STADO_CONFIG"] = str(config)
        env["XDG_DATA_HOME"] = str(directory / "xdg-data")
        return env


def make_target(backend: str, tmp_path: Path, server=None) -> StoreTarget:
    """A StoreTarget with a fresh prefix; `server` is the SeaweedFS or Azurite handle for cloud backends."""
    fresh = f"t-{uuid.uuid4().hex[:12]}"
    if backend == "file":
        return StoreTarget("file", f"file://{tmp_path / 'store' / fresh}")
    if backend == "s3":
        return StoreTarget("s3", f"s3://{server.bucket}/{fresh}", server.options, server.env)
    if backend == "azure":
        return StoreTarget("azure", f"az://{server.container}/{fresh}", server.options, server.env)
    raise ValueError(f"unknown backend {backend!r}; choose from {BACKENDS}")


def server_for(request, backend: str):
    """The server fixture a backend needs (started on first use), or None for the local directory."""
    name = {"s3": "seaweedfs", "azure": "azurite"}.get(backend)
    return request.getfixturevalue(name) if name else None


# -- the claim race: many claimants, one winner per key -------------------------------------------

def claim_keys(store: ObjectStore, worker: int, keys: list[str], barrier) -> tuple[list[str], float]:
    """Race put_if_absent over `keys` after `barrier`; return the keys this worker won and its seconds.
    Each body names its writer, so the caller can check the stored winner against the reported one."""
    won = []
    barrier.wait(timeout=120)
    started = time.perf_counter()
    for key in keys:
        nonce = uuid.uuid4().hex
        try:
            store.put_if_absent(key, json.dumps({"worker": worker, "nonce": nonce}).encode())
        except AlreadyExists:
            continue
        except StoreUnavailable:
            # The connection dropped mid-request (a loaded server resets some): the create may or may
            # not have landed. Settle it as a claimant must, by reading the key back.
            if _stored_nonce(store, key) != nonce:
                continue
        won.append(key)
    return won, time.perf_counter() - started


def _stored_nonce(store: ObjectStore, key: str, attempts: int = 20) -> str | None:
    for attempt in range(attempts):
        try:
            return json.loads(store.get(key).data)["nonce"]
        except NotFound:
            return None
        except StoreUnavailable:
            if attempt == attempts - 1:
                raise
            time.sleep(0.05 * (attempt + 1))


def claim_process(url: str, options: dict, env: dict, worker: int, keys: list[str], barrier, results) -> None:
    """Entry point of one spawned claimant."""
    try:
        store = open_store(url, options, env=env)
        results.put((worker, *claim_keys(store, worker, keys, barrier)))
    except BaseException as exc:
        barrier.abort()
        results.put((worker, f"{type(exc).__name__}: {exc}", 0.0))
        raise


def increment_process(url: str, options: dict, env: dict, key: str, times: int, barrier, results) -> None:
    """Entry point of one spawned compare-and-swap incrementer: read, add one, put_if_match, retry on conflict."""
    from stado.objectstore import PreconditionFailed

    try:
        store = open_store(url, options, env=env)
        barrier.wait(timeout=120)
        conflicts = 0
        for _ in range(times):
            while True:
                blob = store.get(key)
                doc = json.loads(blob.data)
                doc["count"] += 1
                doc["nonce"] = nonce = uuid.uuid4().hex  # bytes never repeat, whatever the backend's versions are
                try:
                    store.put_if_match(key, json.dumps(doc).encode(), blob.version)
                    break
                except PreconditionFailed:
                    # A retried request can report our own landed write as a conflict: the nonce tells.
                    if json.loads(store.get(key).data)["nonce"] == nonce:
                        break
                    conflicts += 1
        results.put(conflicts)
    except BaseException as exc:
        barrier.abort()
        results.put(f"{type(exc).__name__}: {exc}")
        raise
