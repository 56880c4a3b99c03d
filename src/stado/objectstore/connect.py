"""Open the store a URL or STADO_CONFIG names.

URLs::

    file:///abs/path          local directory (the default: $XDG_DATA_HOME/stado/store)
    memory://  memory://NAME  in-process; a NAME is shared by every open in this process
    s3://BUCKET[/PREFIX]      S3 or an S3-compatible server (endpoint option)
    az://CONTAINER[/PREFIX]   Azure Blob (azure:// too)
    gs://BUCKET[/PREFIX]      Google Cloud Storage

Every verb of a store with a PREFIX works below it: keys are relative to it, list returns
relative keys, and two prefixes never see each other's objects.

STADO_CONFIG names a TOML file with one table::

    [store]
    url = "s3://stado/q"
    endpoint = "http://127.0.0.1:8333"   # S3-compatible server, Azure endpoint or GCS base URL
    region = "us-east-1"
    allow_http = true                    # only for a plain-HTTP endpoint
    # az:// only: account = "NAME", emulator = true (Azurite's well-known account and key)
    # any cloud: connect_timeout = 5, timeout = 60, max_retries = 4, retry_timeout = 20 (seconds)

Credentials never come from the file (nor from job documents): they are the backend's usual
environment variables, read from the environment of the process that opens the store:
AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN; AZURE_STORAGE_ACCOUNT_NAME /
AZURE_STORAGE_ACCOUNT_KEY / AZURE_STORAGE_SAS_TOKEN; GOOGLE_APPLICATION_CREDENTIALS /
GOOGLE_SERVICE_ACCOUNT / GOOGLE_BEARER_TOKEN (obstore also reads its other documented
variables, and the cloud's metadata service when none is set). Opening a cloud store sends no
request: an unreachable endpoint or refused credentials surface, as StoreUnavailable or
AccessDenied with a one-line message, on the first operation.
"""
import os
from collections.abc import Mapping

from .base import ConfigError, ObjectStore

CLOUD_SCHEMES = {"s3": "s3", "az": "azure", "azure": "azure", "gs": "gcs"}
CLIENT_OPTIONS = ("connect_timeout", "timeout", "max_retries", "retry_timeout", "allow_http")
OPTIONS = {
    "s3": ("endpoint", "region", "virtual_hosted_style") + CLIENT_OPTIONS,
    "azure": ("endpoint", "account", "emulator") + CLIENT_OPTIONS,
    "gcs": ("endpoint",) + CLIENT_OPTIONS,
}
# (environment variable, obstore config key): read from the `env` given, not only os.environ.
CREDENTIAL_ENV = {
    "s3": (("AWS_ACCESS_KEY_ID", "access_key_id"), ("AWS_SECRET_ACCESS_KEY", "secret_access_key"),
           ("AWS_SESSION_TOKEN", "session_token"), ("AWS_REGION", "region"), ("AWS_DEFAULT_REGION", "region"),
           ("AWS_ENDPOINT_URL", "endpoint")),
    "azure": (("AZURE_STORAGE_ACCOUNT_NAME", "account_name"), ("AZURE_STORAGE_ACCOUNT_KEY", "account_key"),
              ("AZURE_STORAGE_SAS_TOKEN", "sas_key"), ("AZURE_STORAGE_ENDPOINT", "endpoint")),
    "gcs": (("GOOGLE_APPLICATION_CREDENTIALS", "application_credentials"),
            ("GOOGLE_SERVICE_ACCOUNT", "service_account"), ("GOOGLE_SERVICE_ACCOUNT_KEY", "service_account_key"),
            ("GOOGLE_BEARER_TOKEN", "bearer_token")),
}
# Azurite's account and key are public constants, documented by Microsoft: not a secret.
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
# obstore's default retries for 3 minutes; a CLI facing a dead endpoint should say so in seconds.
DEFAULT_CLIENT = {"connect_timeout": 5, "timeout": 60, "max_retries": 4, "retry_timeout": 20}

_memory_stores: dict[str, ObjectStore] = {}


def open_store(url: str, options: Mapping[str, object] | None = None, *,
               env: Mapping[str, str] | None = None) -> ObjectStore:
    """The store `url` names. `options` are the non-secret settings above; credentials come from
    `env` (default os.environ). Raises ConfigError for a URL or option that cannot work."""
    options = dict(options or {})
    env = os.environ if env is None else env
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise ConfigError(f"store url {url!r} has no scheme: use file:///abs/path, s3://bucket/prefix, "
                          "az://container/prefix, gs://bucket/prefix or memory://")
    if scheme == "file":
        return _open_file(url, rest, options)
    if scheme == "memory":
        return _open_memory(url, rest, options)
    provider = CLOUD_SCHEMES.get(scheme)
    if provider is None:
        raise ConfigError(f"unknown store scheme {scheme + '://'!r} in {url!r}: use file://, s3://, az://, gs:// "
                          "or memory://")
    bucket, _, prefix = rest.partition("/")
    prefix = prefix.strip("/")
    if not bucket:
        raise ConfigError(f"store url {url!r} names no bucket or container: use {scheme}://NAME/optional/prefix")
    unknown = sorted(set(options) - set(OPTIONS[provider]))
    if unknown:
        raise ConfigError(f"unknown option(s) {', '.join(unknown)} for {scheme}:// stores: "
                          f"use {', '.join(OPTIONS[provider])}")
    return _open_cloud(url, provider, bucket, prefix, options, env)


def store_from_environment(env: Mapping[str, str] | None = None) -> ObjectStore:
    """The store STADO_CONFIG selects, or the per-user default directory when it is unset."""
    env = os.environ if env is None else env
    path = env.get("STADO_CONFIG")
    if not path:
        return _open_file(None, default_store_dir(env), {})
    url, options = load_config(path)
    return open_store(url, options, env=env)


def default_store_dir(env: Mapping[str, str]) -> str:
    data_home = env.get("XDG_DATA_HOME", "")
    if not os.path.isabs(data_home):  # the XDG spec says to ignore a relative value
        data_home = os.path.join(env.get("HOME") or os.path.expanduser("~"), ".local", "share")
    return os.path.join(data_home, "stado", "store")


def load_config(path: str) -> tuple[str, dict[str, object]]:
    """(url, options) from a STADO_CONFIG file; ConfigError names the file and the fix."""
    import tomllib

    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except FileNotFoundError:
        raise ConfigError(f"STADO_CONFIG names {path}, which does not exist: create it or unset STADO_CONFIG "
                          "to use the local default store") from None
    except OSError as exc:
        raise ConfigError(f"cannot read STADO_CONFIG file {path} ({exc.strerror})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"STADO_CONFIG file {path} is not valid TOML ({exc}): fix it") from None
    table = doc.get("store")
    if not isinstance(table, dict) or not isinstance(table.get("url"), str):
        raise ConfigError(f"STADO_CONFIG file {path} needs a [store] table with url = \"s3://bucket/prefix\" "
                          "(or file:///..., az://..., gs://...)")
    options = {k: v for k, v in table.items() if k != "url"}
    secrets = sorted(k for k in options if any(word in k.lower() for word in ("secret", "key", "token", "password")))
    if secrets:
        raise ConfigError(f"STADO_CONFIG file {path} sets {', '.join(secrets)}: credentials come from the "
                          "backend's environment variables (e.g. AWS_SECRET_ACCESS_KEY), never from the file")
    return table["url"], options


def _open_file(url: str | None, path: str, options: dict) -> ObjectStore:
    from .file import FileStore

    if options:
        raise ConfigError(f"file:// stores take no options (got {', '.join(sorted(options))})")
    if path.startswith("localhost/"):
        path = path[len("localhost"):]
    if not os.path.isabs(path):
        raise ConfigError(f"store url {url!r} needs an absolute path: file:///abs/path")
    return FileStore(path, url)


def _open_memory(url: str, name: str, options: dict) -> ObjectStore:
    from .memory import MemoryStore

    if options:
        raise ConfigError(f"memory:// stores take no options (got {', '.join(sorted(options))})")
    if "/" in name:
        raise ConfigError(f"memory:// takes a name, not a path ({url!r}): use memory://NAME")
    if not name:
        return MemoryStore(url)
    return _memory_stores.setdefault(name, MemoryStore(url))


def _client_settings(options: dict) -> tuple[dict, dict]:
    from datetime import timedelta

    settings = {**DEFAULT_CLIENT, **{k: options[k] for k in CLIENT_OPTIONS if k in options}}
    try:
        client = {"connect_timeout": timedelta(seconds=float(settings["connect_timeout"])),
                  "timeout": timedelta(seconds=float(settings["timeout"]))}
        retry = {"max_retries": int(settings["max_retries"]),
                 "retry_timeout": timedelta(seconds=float(settings["retry_timeout"]))}
    except (TypeError, ValueError):
        raise ConfigError("connect_timeout, timeout and retry_timeout are seconds and max_retries a count: "
                          "fix the store options") from None
    if "allow_http" in settings:
        client["allow_http"] = bool(settings["allow_http"])
    return client, retry


def _open_cloud(url: str, provider: str, bucket: str, prefix: str, options: dict,
                env: Mapping[str, str]) -> ObjectStore:
    from .cloud import CloudStore

    client, retry = _client_settings(options)
    config: dict[str, object] = {}
    for var, key in CREDENTIAL_ENV[provider]:
        if env.get(var) and key not in config:
            config[key] = env[var]
    endpoint = options.get("endpoint")
    if provider == "azure" and options.get("emulator"):
        config.setdefault("account_name", AZURITE_ACCOUNT)
        config.setdefault("account_key", AZURITE_KEY)
        endpoint = endpoint or f"http://127.0.0.1:10000/{AZURITE_ACCOUNT}"
        client.setdefault("allow_http", True)
    if endpoint:
        config["base_url" if provider == "gcs" else "endpoint"] = endpoint
        if endpoint.startswith("http://"):
            client.setdefault("allow_http", True)
    if provider == "s3":
        if "region" in options:
            config["region"] = options["region"]
        # Custom endpoints (SeaweedFS, MinIO, ...) rarely resolve bucket subdomains.
        config["virtual_hosted_style_request"] = bool(options.get("virtual_hosted_style", not endpoint))
    if provider == "azure" and options.get("account"):
        config["account_name"] = options["account"]
    try:
        from obstore.store import AzureStore, GCSStore, S3Store

        cls = {"s3": S3Store, "azure": AzureStore, "gcs": GCSStore}[provider]
        store = cls(bucket, prefix=prefix or None, client_options=client, retry_config=retry, **config)
    except Exception as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError(f"cannot open {url}: {first}") from None
    endpoint = config.get("base_url") or config.get("endpoint")
    where = f"{url} at {endpoint}" if endpoint else url
    return CloudStore(url, provider, store, where)
