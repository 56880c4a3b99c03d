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
    allow_http = true                    # needed for a plain-HTTP endpoint (refused without it)
    # az:// only: account = "NAME", emulator = true (Azurite's well-known account and key)
    # any cloud: connect_timeout = 5, timeout = 60 (seconds); max_retries = 4, retry_timeout = 20: a failed request
    #   is tried again (objectstore/retries.py says on which failures) at most 4 times, within 20 seconds
    # any cloud: stall_timeout = 600: a transfer that moves no bytes for this long is ended (seconds; off
    #   unless set: a stalled transfer is shown as stalled and cancelled by name); large objects move in
    #   ranges and parts, so `timeout` bounds one request, never a whole transfer

Each option's type, and the endpoint's shape (an http(s) URL with a host), is checked at open:
ConfigError names the option; obstore never sees a value its Rust code could panic on.

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

from .base import ConfigError, ObjectStore

TYPE_CHECKING = False  # collections.abc imports collections: the annotations are the type checker's alone
if TYPE_CHECKING:
    from collections.abc import Mapping

CLOUD_SCHEMES = {"s3": "s3", "az": "azure", "azure": "azure", "gs": "gcs"}
CLIENT_OPTIONS = ("connect_timeout", "timeout", "max_retries", "retry_timeout", "allow_http")
OPTIONS = {
    "s3": ("endpoint", "region", "virtual_hosted_style", "stall_timeout") + CLIENT_OPTIONS,
    "azure": ("endpoint", "account", "emulator", "stall_timeout") + CLIENT_OPTIONS,
    "gcs": ("endpoint", "stall_timeout") + CLIENT_OPTIONS,
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

_memory_stores: dict[str, ObjectStore] = {}


def open_store(url: str, options: "Mapping[str, object] | None" = None, *,
               env: "Mapping[str, str] | None" = None) -> ObjectStore:
    """The store `url` names. `options` are the non-secret settings above; credentials come from
    `env` (default os.environ). Raises ConfigError for a URL or option that cannot work."""
    options = dict(options or {})
    env = os.environ if env is None else env
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise ConfigError(f"store url {url!r} has no scheme: use file:///abs/path, s3://bucket/prefix, "
                          "az://container/prefix, gs://bucket/prefix or memory://")
    if "?" in rest or "#" in rest:
        from .cloudconfig import shown

        raise ConfigError(f"store url {shown(url)} has a query or fragment ('?' or '#'), which no store takes: give "
                          f"the {'path' if scheme == 'file' else 'bucket and prefix'} alone, e.g. "
                          f"{'file:///srv/stado' if scheme == 'file' else scheme + '://NAME/prefix'}")
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
    from .cloudconfig import open_cloud

    return open_cloud(url, provider, bucket, prefix, options, env)


def store_from_environment(env: "Mapping[str, str] | None" = None) -> ObjectStore:
    """The store STADO_CONFIG selects, or the per-user default directory when it is unset."""
    env = os.environ if env is None else env
    path = env.get("STADO_CONFIG")
    if not path:
        return _open_file(None, default_store_dir(env), {})
    url, options = load_config(path)
    return open_store(url, options, env=env)


def same_store_environment(env: "Mapping[str, str] | None" = None) -> dict[str, str | None]:
    """The variables that make another process open the store `env` opens (None: unset it), whatever its own
    environment says: STADO_CONFIG as an absolute path, and the credential variables of its backend (those
    `env` lacks are unset, so another process's own never mix in); for the default directory, no
    STADO_CONFIG and XDG_DATA_HOME naming the directory's root."""
    env = os.environ if env is None else env
    path = env.get("STADO_CONFIG")
    if not path:
        return {"STADO_CONFIG": None, "XDG_DATA_HOME": os.path.dirname(os.path.dirname(default_store_dir(env)))}
    url, _ = load_config(path)
    out: dict[str, str | None] = {"STADO_CONFIG": os.path.abspath(path)}
    provider = CLOUD_SCHEMES.get(url.partition("://")[0])
    for var, _ in CREDENTIAL_ENV.get(provider or "", ()):
        out[var] = env.get(var) or None
    return out


def default_store_dir(env: "Mapping[str, str]") -> str:
    data_home = env.get("XDG_DATA_HOME", "")
    if not os.path.isabs(data_home):  # the XDG spec says to ignore a relative value
        data_home = os.path.join(env.get("HOME") or os.path.expanduser("~"), ".local", "share")
    return os.path.join(data_home, "stado", "store")


def _plain_toml(text: str) -> dict | None:
    """The few TOML shapes a STADO_CONFIG file is written in, parsed without tomllib (whose import, with typing, re
    and datetime, costs `stado submit` about 0.7x a bare Python start): `[table]` headers, `key = "text"` (no
    escapes), `key = 'text'`, `key = true|false`, `key = 12` or `1.5`, comments and blank lines. None for anything
    else (then tomllib parses the file, and says what is wrong with it)."""
    doc: dict = {}
    table = doc
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            if not line.endswith("]") or line.startswith("[[") or any(c in line[1:-1] for c in "[]\"' ."):
                return None
            name = line[1:-1].strip()
            if not name or name in doc:
                return None
            table = doc[name] = {}
            continue
        key, eq, value = line.partition("=")
        key, value = key.strip(), value.strip()
        if not eq or not key or not all(c.isalnum() or c in "_-" for c in key) or key in table:
            return None
        if value[:1] in ('"', "'"):
            quote = value[0]
            end = value.find(quote, 1)
            rest = value[end + 1:].strip() if end > 0 else "x"
            text_value = value[1:end]
            if end < 0 or (rest and not rest.startswith("#")) or (quote == '"' and "\\" in text_value) \
                    or value.startswith(quote * 3):
                return None
            table[key] = text_value
            continue
        value = value.partition("#")[0].strip()
        if value in ("true", "false"):
            table[key] = value == "true"
        elif value.lstrip("+-").isdigit() and value.lstrip("+-").isascii() and value[:1] != "0" or value == "0":
            if value.lstrip("+-")[:1] == "0" or value.count("+") + value.count("-") > 1:
                return None
            table[key] = int(value)
        else:
            whole, dot, frac = value.lstrip("+-").partition(".")
            if not (dot and whole.isdigit() and frac.isdigit() and (whole + frac).isascii()) \
                    or (whole[:1] == "0" and whole != "0") or len(value) - len(value.lstrip("+-")) > 1:
                return None
            table[key] = float(value)
    return doc


def load_config(path: str) -> tuple[str, dict[str, object]]:
    """(url, options) from a STADO_CONFIG file; ConfigError names the file and the fix."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise ConfigError(f"STADO_CONFIG names {path}, which does not exist: create it or unset STADO_CONFIG "
                          "to use the local default store") from None
    except OSError as exc:
        raise ConfigError(f"cannot read STADO_CONFIG file {path} ({exc.strerror})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"STADO_CONFIG file {path} is not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset "
                          f"{exc.start}): TOML files are UTF-8; fix it") from None
    doc = _plain_toml(text)
    if doc is None:
        import tomllib

        try:
            doc = tomllib.loads(text)
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
