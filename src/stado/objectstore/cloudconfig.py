"""How STADO_CONFIG's [store] options and the environment's credentials become a cloud store (S3, Azure Blob,
GCS) on obstore's client: each option checked in one line, the client's timeouts and retries, plain HTTP refused
unless allowed, and the native store built (connect.open_store calls it for s3://, az:// and gs://)."""
from .base import ConfigError, ObjectStore
from .connect import CLIENT_OPTIONS, CREDENTIAL_ENV

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

# Azurite's account and key are public constants, documented by Microsoft: not a secret.
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
# obstore's default retries for 3 minutes; a CLI facing a dead endpoint should say so in seconds.
DEFAULT_CLIENT = {"connect_timeout": 5, "timeout": 60, "max_retries": 4, "retry_timeout": 20}
BOOLEAN_OPTIONS = ("allow_http", "virtual_hosted_style", "emulator")
TEXT_OPTIONS = ("region", "account")
SECONDS_OPTIONS = ("connect_timeout", "timeout", "retry_timeout", "stall_timeout")


def shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def check_endpoint(value) -> str:
    """An endpoint is an http(s) URL with a host (and a valid port, if any). Anything else would reach
    obstore, whose Rust code panics on some malformed URLs instead of raising an error. Checked by hand:
    urllib.parse costs every `stado submit` on a cloud store ~3.4 ms of imports, 5-6% of its start-up
    (measured against SeaweedFS); tests/stado/fuzz/test_endpoint_check.py holds this check to urllib's reading."""
    if not _endpoint_ok(value):
        raise ConfigError(f"store option endpoint must be a URL such as http://127.0.0.1:8333 or "
                          f"https://s3.example.com, not {shown(value)}: fix it in STADO_CONFIG")
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
            raise ConfigError(f"store option {key} must be true or false, not {shown(options[key])}: fix it in "
                              "STADO_CONFIG")
    for key in TEXT_OPTIONS:
        value = options.get(key)
        if key in options and (not isinstance(value, str) or not value.strip()):
            raise ConfigError(f"store option {key} must be text, not {shown(value)}: fix it in STADO_CONFIG")
    for key in SECONDS_OPTIONS:
        value = options.get(key)
        if key in options and (isinstance(value, bool) or not isinstance(value, (int, float))
                               or not 0 < value < 1e9):
            raise ConfigError(f"store option {key} is seconds, a number greater than 0, not {shown(value)}: fix it "
                              "in STADO_CONFIG")
    value = options.get("max_retries")
    if "max_retries" in options and (isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 100):
        raise ConfigError(f"store option max_retries is a count from 0 to 100, not {shown(value)}: fix it in "
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


def open_cloud(url: str, provider: str, bucket: str, prefix: str, options: dict,
               env: "Mapping[str, str]") -> ObjectStore:
    from .cloud import CloudStore

    check_options(options)
    client, retry = _client_settings(options)
    config = _credentials(provider, env)
    _place(provider, options, config, client)
    store, once = _native(url, provider, bucket, prefix, client, retry, config)
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


def _credentials(provider: str, env: "Mapping[str, str]") -> dict[str, object]:
    """obstore's config from the provider's environment variables (the first of two that set one key wins)."""
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
                                      f"{shown(env[var])}: fix or unset it") from None
    return config


def _place(provider: str, options: dict, config: dict, client: dict) -> None:
    """Where the store is and how it is reached, into `config` and `client`: the endpoint (the emulator's by
    default), plain HTTP refused unless allowed, region and addressing style, the Azure account."""
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
        raise ConfigError(f"{where} {shown(reached)} is plain HTTP, which STADO_CONFIG does not allow: requests and "
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


def _native(url: str, provider: str, bucket: str, prefix: str, client: dict, retry: dict, config: dict):
    """(obstore's native store, a function that builds the same store with no retries of its own: stado's tries
    come after obstore's, cloud.CloudStore._call). ConfigError, in one line, for one obstore refuses."""
    from .cloud import is_panic

    try:
        from .native import obstore

        classes = obstore()._store  # the native classes: obstore's typed wrappers add nothing stado calls
        cls = {"s3": classes.S3Store, "azure": classes.AzureStore, "gcs": classes.GCSStore}[provider]
        store = cls(bucket, prefix=prefix or None, client_options=client, retry_config=retry, **config)
    except BaseException as exc:
        if not isinstance(exc, Exception) and not is_panic(exc):
            raise
        if provider == "azure" and "Account must be specified" in str(exc):
            raise ConfigError(f"cannot open {url}: no storage account: set AZURE_STORAGE_ACCOUNT_NAME (and "
                              "AZURE_STORAGE_ACCOUNT_KEY or AZURE_STORAGE_SAS_TOKEN), or account = \"NAME\" in "
                              "STADO_CONFIG") from None
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError(f"cannot open {url}: {first}") from None

    def once():
        return cls(bucket, prefix=prefix or None, client_options=client, retry_config={**retry, "max_retries": 0},
                   **config)

    return store, once
