"""What a cloud store's failure means, in one line that names what to do: obstore's errors (and panics) translated
into stado's store errors (AccessDenied, NotFound, StoreUnavailable, ConfigError...), the credentials each provider
reads, an HTML page or a server that is not an object store told apart. Pure: unit-tested without a server."""
from .base import AccessDenied, AlreadyExists, NotFound, PreconditionFailed, StoreError, StoreUnavailable
from .native import obstore
from .retries import Budget, obstore_budget, read_failure, unwell

CREDENTIAL_HINTS = {
    "s3": "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
    "azure": "AZURE_STORAGE_ACCOUNT_NAME and AZURE_STORAGE_ACCOUNT_KEY (or AZURE_STORAGE_SAS_TOKEN)",
    "gcs": "GOOGLE_APPLICATION_CREDENTIALS",
}
# With no credentials in the environment, obstore asks the cloud's metadata service (instance role, managed
# identity, service account) for them: an error that names it means no credentials were found.
_METADATA_SERVICE = ("169.254.169.254", "169.254.170.2", "metadata.google.internal", "computeMetadata/",
                     "/latest/api/token", "/metadata/identity/", "Error performing token request")
_MISSING_BUCKET = ("NoSuchBucket", "ContainerNotFound", "The specified bucket does not exist")


def one_line(text: str) -> str:
    """The parts of an obstore message worth showing: HTTP status, the server's error code, the OS reason."""
    import re

    parts = []
    status = re.search(r"status code: (\d{3}[A-Za-z ]*)", text)
    if status:
        parts.append(status.group(1).strip())
    code = re.search(r"<Code>([^<]+)</Code>", text)
    if code:
        parts.append(code.group(1))
    reason = re.search(r'message: "([^"]+)"', text)
    if reason:
        parts.append(reason.group(1))
    elif not status and re.search(r"timed out|kind: Timeout|TimedOut", text):
        parts.append("timed out")
    elif not status and "dns error" in text:
        parts.append("name not resolved")
    if not parts:
        parts.append(_first_words(text))
    return ", ".join(parts)


def _first_words(text: str) -> str:
    """The first line of an obstore message without what says nothing to a reader (the request's URL and time,
    the retry counts), bounded at a word."""
    import re

    from ..core.brief import brief

    first = text.splitlines()[0] if text else ""
    first = re.sub(r"Error performing \w+ \S+ in [\d.]+\S*(, after \d+ retries, max_retries: \d+, retry_timeout: "
                   r"\S+)?\s*-\s*", "", first)
    return brief(first, 160) or "unknown error"


PROTOCOLS = {"s3": "S3", "azure": "Azure Blob", "gcs": "Google Cloud Storage"}
# An answer no object store gives: an HTML page as an error (stores answer errors in XML or JSON, with their own
# error code), a listing that is not a listing, or a server that does not know PUT at all. (A page with a status
# worth trying again, such as a gateway's 502-504, is the store or the path to it being unwell, not the endpoint.)
_HTML = r"non-2xx status code: (?!50[0234]|429|408)\d{3}[^:]*: \s*<(!DOCTYPE html|html)"
_NOT_A_STORE = r"invalid list response|status code: 50[15] [^:]*: (?![\s\S]*<Code>)"


def _is_html(text: str) -> bool:
    import re

    return re.search(_HTML, text, re.IGNORECASE) is not None


def _not_a_store(text: str) -> bool:
    import re

    return _is_html(text) or re.search(_NOT_A_STORE, text, re.IGNORECASE) is not None


def is_panic(exc: BaseException) -> bool:
    """pyo3 turns a panic in obstore's Rust code into pyo3_runtime.PanicException, a BaseException that
    cannot be imported by name: recognise it by its type's name."""
    return type(exc).__name__ == "PanicException"


def translate(exc: BaseException, provider: str, where: str, key: str | None,
              budget: Budget | None = None) -> StoreError:
    """Map an obstore (or builtin) exception to the store's error contract, with a one-line message.
    KeyboardInterrupt, SystemExit and other BaseExceptions that are not a Rust panic are raised again.
    `budget`: the tries made (to say how many, over how long); without it, the tries obstore reports."""
    if not isinstance(exc, Exception):
        if not is_panic(exc):
            raise exc
        from ..core.brief import brief

        first = brief((str(exc).splitlines() or ["panic"])[0], 160)
        return StoreError(f"{where}: internal error in the object-store client ({first}); check the store options "
                          "in STADO_CONFIG")
    import re

    oe = obstore().exceptions
    text = str(exc)
    detail = one_line(text)
    if _not_a_store(text):
        return StoreUnavailable(f"{where} is not an object store ({detail}{', an HTML page' if _is_html(text) else ''}"
                                f"): the endpoint answers, but not with the {PROTOCOLS[provider]} API; check the "
                                "endpoint in STADO_CONFIG (its host, port and path)")
    if isinstance(exc, FileNotFoundError):
        if any(marker in text for marker in _MISSING_BUCKET):
            return StoreUnavailable(f"{where}: the bucket or container does not exist ({detail}); create it or fix "
                                    "the url in STADO_CONFIG")
        return NotFound(key or "")
    if isinstance(exc, oe.AlreadyExistsError):
        return AlreadyExists(key or "")
    if isinstance(exc, oe.PreconditionError):
        return PreconditionFailed(key or "")
    if any(marker in text for marker in _METADATA_SERVICE):
        return AccessDenied(f"no credentials found for {where}: with none in the environment, the client asked the "
                            f"cloud's metadata service, which answers only on a cloud machine with a role ({detail}); "
                            f"set {CREDENTIAL_HINTS[provider]}")
    if "RequestTimeTooSkewed" in text or "AuthenticationFailed" in text and "time" in text.lower():
        return AccessDenied(f"{where} refused the request's time ({detail}): requests are signed with this host's "
                            "clock, and the store accepts them only within 15 minutes of its own; fix this host's "
                            "time (NTP)")
    if isinstance(exc, (oe.PermissionDeniedError, oe.UnauthenticatedError)) or re.search(
            r"status code: 40[13]\b", text):
        return AccessDenied(f"{where} refused the request ({detail}): check {CREDENTIAL_HINTS[provider]} and "
                            "that they may use this bucket")
    if any(marker in text for marker in _MISSING_BUCKET):
        return StoreUnavailable(f"{where}: the bucket or container does not exist ({detail}); create it or fix the "
                                "url in STADO_CONFIG")
    failure = read_failure(text)
    if failure.transient:
        budget = budget or obstore_budget(failure, text)
        return unwell(failure, where, budget, budget.timeout)
    if "error sending request" in text or "HTTP error" in text or re.search(r"status code: 5\d\d", text):
        return StoreUnavailable(f"cannot reach {where} ({detail}): check the endpoint in STADO_CONFIG and that "
                                "the server is up")
    return StoreError(f"{where}: {detail}")


class Translated:
    """The one translation of obstore's errors (translate()), as a context: the store's error leaves with obstore's
    as its cause. A Rust panic is a BaseException, so everything is caught: translate() tells a panic apart and
    lets KeyboardInterrupt, SystemExit and a generator's close go on as they are."""

    __slots__ = ("provider", "where", "key")

    def __init__(self, provider: str, where: str, key: str | None):
        self.provider, self.where, self.key = provider, where, key

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, exc, tb) -> None:
        if exc is None or isinstance(exc, StoreError):
            return
        raise translate(exc, self.provider, self.where, self.key) from exc
