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
# Azurite's account and key are public constants, documented by Microsoft: not a secret.
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
# obstore's default retries for 3 minutes; a CLI facing a dead endpoint should say so in seconds.
DEFAULT_CLIENT = {"connect_timeout": 5, "timeout": 60, "max_retries": 4, "retry_timeout": 20}

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
        raise ConfigError(f"store url {_shown(url)} has a query or fragment ('?' or '#'), which no store takes: give "
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
    return _open_cloud(url, provider, bucket, prefix, options, env)


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


BOOLEAN_OPTIONS = ("allow_http", "virtual_hosted_style", "emulator")
TEXT_OPTIONS = ("region", "account")
SECONDS_OPTIONS = ("connect_timeout", "timeout", "retry_timeout", "stall_timeout")


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def check_endpoint(value) -> str:
    """An endpoint is an http(s) URL with a host (and a valid port, if any). Anything else would reach
    obstore, whose Rust code panics on some malformed URLs instead of raising an error. Checked by hand:
    urllib.parse costs every `stado submit` on a cloud store ~3.4 ms of imports, 5-6% of its start-up
    (measured against SeaweedFS); tests/fuzz/test_endpoint_check.py holds this check to urllib's reading."""
    if not _endpoint_ok(value):
        raise ConfigError(f"store option endpoint must be a URL such as http://127.0.0.1:8333 or "
                          f"https://s3.example.com, not {_shown(value)}: fix it in STADO_CONFIG")
    return value


def _endpoint_ok(value) -> bool:
    if not isinstance(value, str) or any(c.isspace() or not c.isprintable() for c in value):
        return False
    scheme, sep, rest = value.partition("://")
    if not sep or scheme.lower() not in ("http", "https"):
        return False
    for end in "/?#":
        rest = rest.partition(end)[0]
    user, _, host_port = rest.rpartition("@")
    if "[" in user or "]" in user:  # brackets belong to an IPv6 host only
        return False
    if host_port.startswith("["):  # [IPv6]:port
        host, bracket, port = host_port[1:].partition("]")
        if not bracket or not host or not all(c in "0123456789abcdefABCDEF:." for c in host):
            return False
        if port and not port.startswith(":"):
            return False
        port = port[1:]
    else:
        host, _, port = host_port.partition(":")
        if not host or not all(c.isalnum() or c in "-._" for c in host):
            return False
    if port or host_port.endswith(":"):
        return port.isdigit() and port.isascii() and 0 < int(port) < 65536
    return True


def check_options(options: "Mapping[str, object]") -> None:
    """The type of every non-secret option, checked before anything is handed to obstore."""
    for key in BOOLEAN_OPTIONS:
        if key in options and not isinstance(options[key], bool):
            raise ConfigError(f"store option {key} must be true or false, not {_shown(options[key])}: fix it in "
                              "STADO_CONFIG")
    for key in TEXT_OPTIONS:
        value = options.get(key)
        if key in options and (not isinstance(value, str) or not value.strip()):
            raise ConfigError(f"store option {key} must be text, not {_shown(value)}: fix it in STADO_CONFIG")
    for key in SECONDS_OPTIONS:
        value = options.get(key)
        if key in options and (isinstance(value, bool) or not isinstance(value, (int, float))
                               or not 0 < value < 1e9):
            raise ConfigError(f"store option {key} is seconds, a number greater than 0, not {_shown(value)}: fix it "
                              "in STADO_CONFIG")
    value = options.get("max_retries")
    if "max_retries" in options and (isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 100):
        raise ConfigError(f"store option max_retries is a count from 0 to 100, not {_shown(value)}: fix it in "
                          "STADO_CONFIG")
    if "endpoint" in options:
        check_endpoint(options["endpoint"])


def _client_settings(options: dict) -> tuple[dict, dict]:
    from datetime import timedelta

    settings = {**DEFAULT_CLIENT, **{k: options[k] for k in CLIENT_OPTIONS if k in options}}
    client = {"connect_timeout": timedelta(seconds=float(settings["connect_timeout"])),
              "timeout": timedelta(seconds=float(settings["timeout"]))}
    from .retries import BASE, INIT_BACKOFF, MAX_BACKOFF

    # The backoff is obstore's default, given here so that its retries and stado's own (retries.py) keep one pace.
    retry = {"max_retries": int(settings["max_retries"]),
             "retry_timeout": timedelta(seconds=float(settings["retry_timeout"])),
             "backoff": {"init_backoff": timedelta(seconds=INIT_BACKOFF), "max_backoff": timedelta(seconds=MAX_BACKOFF),
                         "base": BASE}}
    if "allow_http" in settings:
        client["allow_http"] = settings["allow_http"]
    return client, retry


def _no_tls_ever(provider: str, endpoint: object, config: "Mapping[str, object]") -> bool:
    """Whether a client for this store makes no TLS connection at all: a plain-HTTP endpoint, and static
    credentials (S3 keys; an Azure account key or SAS token), so that no token service is reached over HTTPS."""
    if not isinstance(endpoint, str) or endpoint[:7].lower() != "http://":
        return False
    if provider == "s3":
        return bool(config.get("access_key_id") and config.get("secret_access_key"))
    if provider == "azure":
        return bool(config.get("account_key") or config.get("sas_key"))
    return False  # GCS asks its token service over HTTPS unless given a bearer token: not worth telling apart


def _open_cloud(url: str, provider: str, bucket: str, prefix: str, options: dict,
                env: "Mapping[str, str]") -> ObjectStore:
    from .cloud import CloudStore, is_panic

    check_options(options)
    client, retry = _client_settings(options)
    config: dict[str, object] = {}
    for var, key in CREDENTIAL_ENV[provider]:
        if env.get(var) and key not in config:
            try:
                env[var].encode()
            except UnicodeEncodeError:
                raise ConfigError(f"{var} holds bytes that are not UTF-8: fix or unset it") from None
            config[key] = env[var]
            if key == "endpoint":
                try:
                    check_endpoint(env[var])
                except ConfigError:
                    raise ConfigError(f"{var} must be a URL such as https://s3.example.com, not "
                                      f"{_shown(env[var])}: fix or unset it") from None
    endpoint = options.get("endpoint")
    if provider == "azure" and options.get("emulator"):
        config.setdefault("account_name", AZURITE_ACCOUNT)
        config.setdefault("account_key", AZURITE_KEY)
        endpoint = endpoint or f"http://127.0.0.1:10000/{AZURITE_ACCOUNT}"
        client.setdefault("allow_http", True)
    if endpoint:
        config["base_url" if provider == "gcs" else "endpoint"] = endpoint
    reached = endpoint or config.get("endpoint")
    if isinstance(reached, str) and reached[:7].lower() == "http://" and client.get("allow_http") is not True:
        where = "endpoint" if endpoint else next(var for var, key in CREDENTIAL_ENV[provider] if key == "endpoint")
        raise ConfigError(f"{where} {_shown(reached)} is plain HTTP, which STADO_CONFIG does not allow: requests and "
                          "credentials would cross the network unencrypted; use https://, or set allow_http = true "
                          "under [store] for a server you trust (a local test server)")
    if _no_tls_ever(provider, reached, config):
        # rustls reads the system's CA certificates when the client is built (the bundle and every file of
        # SSL_CERT_DIR: 3-4 ms of every command here); a client that can never make a TLS connection is told not
        # to verify, which skips that. It never makes one: the endpoint is plain HTTP and the credentials are
        # given, so no token service is asked either. (A redirect to https from such an endpoint would reach no
        # further than the plain-HTTP endpoint itself already lets anyone on the path see.)
        client["allow_invalid_certificates"] = True
    if provider == "s3":
        if "region" in options:
            config["region"] = options["region"]
        # Custom endpoints (SeaweedFS, MinIO, ...) rarely resolve bucket subdomains.
        config["virtual_hosted_style_request"] = bool(options.get("virtual_hosted_style", not endpoint))
    if provider == "azure" and options.get("account"):
        config["account_name"] = options["account"]
    try:
        from .native import obstore

        classes = obstore()._store  # the native classes: obstore's typed wrappers add nothing stado calls
        cls = {"s3": classes.S3Store, "azure": classes.AzureStore, "gcs": classes.GCSStore}[provider]
        store = cls(bucket, prefix=prefix or None, client_options=client, retry_config=retry, **config)

        def once():
            """The same store with no retries of its own: stado's tries after obstore's (cloud.CloudStore._call)."""
            return cls(bucket, prefix=prefix or None, client_options=client, retry_config={**retry, "max_retries": 0},
                       **config)
    except BaseException as exc:
        if not isinstance(exc, Exception) and not is_panic(exc):
            raise
        if provider == "azure" and "Account must be specified" in str(exc):
            raise ConfigError(f"cannot open {url}: no storage account: set AZURE_STORAGE_ACCOUNT_NAME (and "
                              "AZURE_STORAGE_ACCOUNT_KEY or AZURE_STORAGE_SAS_TOKEN), or account = \"NAME\" in "
                              "STADO_CONFIG") from None
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError(f"cannot open {url}: {first}") from None
    endpoint = config.get("base_url") or config.get("endpoint")
    where = f"{url} at {endpoint}" if endpoint else url
    opened = CloudStore(url, provider, store, where, timeout=client["timeout"].total_seconds(),
                        max_retries=retry["max_retries"], retry_timeout=retry["retry_timeout"].total_seconds(),
                        once=once)
    if "stall_timeout" in options:
        opened.stall_timeout = float(options["stall_timeout"])
    if provider == "gcs":
        from .tombstones import TombstoneDeletes

        return TombstoneDeletes(opened)
    return opened
