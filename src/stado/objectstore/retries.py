"""What a cloud store tries again, and for how long: one policy for every kind of request.

A request is tried again when its failure may pass: the store answered 500, 502, 503, 504, 429 or 408 (or an
error code S3, Azure or GCS documents as transient: SlowDown, InternalError, ServiceUnavailable, RequestTimeout,
ServerBusy, OperationTimedOut), the connection was reset or closed before a whole answer came (a garbled or cut
answer included), no answer came within the request timeout, or the connection was refused. Nothing else is:
a 4xx is an answer, and asking again gets the same one.

The bound is the user's (STADO_CONFIG `max_retries`, `retry_timeout`): no try starts after `max_retries` retries,
nor once `retry_timeout` seconds have passed since the first try, whoever makes it.

What obstore 0.12.1 (object_store 0.14 inside) tries again by itself, within the same two settings, as measured
through tests/stado/faultproxy.py (tests/stado/test_store_retries.py holds it): every kind of request answered 500,
502, 503, 504, 429 or 408, or whose connection is refused or closed before the answer's head is whole; a reset
connection or a request timeout only for GET, HEAD, LIST and a plain PUT (and a GET whose body is cut short, by
asking for the rest); never a reset or a timeout of a create (If-None-Match), a put-if-match (If-Match) or a delete
(its bulk POST ?delete), nor a LIST whose body is cut short. cloud.py makes each call's first try through obstore,
reads from its error how many tries it made, and makes the ones it left through a client with no retries of its
own, so that the count is exact. signed_delete.py sends the conditional DELETE, which obstore cannot, by this same
policy.

Between tries the wait grows as obstore's does (its defaults, so both keep one pace): the first 0.1 s, each next
one drawn between 0.1 s and twice the one before, at most 15 s, never past the deadline.
"""
import os
import time

from runkit.core.records import record

from .base import StoreUnavailable, StoreUnwell

RETRYABLE_STATUSES = frozenset((408, 429, 500, 502, 503, 504))
# S3's, Azure's and GCS's names for the same transient conditions (S3 may send one inside a 200 answer).
RETRYABLE_CODES = frozenset(("SlowDown", "InternalError", "ServiceUnavailable", "RequestTimeout", "ServerBusy",
                             "OperationTimedOut", "InternalServerError", "TooManyRequests", "rateLimitExceeded",
                             "backendError"))
INIT_BACKOFF, MAX_BACKOFF, BASE = 0.1, 15.0, 2.0
OVERLOADED, DROPPED, NO_ANSWER, REFUSED, UNRESOLVED = "overloaded", "dropped", "no answer", "refused", "unresolved"


class Failure(record("Failure", "how status code reason retries")):
    """What one failed call met, read from obstore's error (or urllib's): `how` is OVERLOADED (the store answered a
    retryable status or code), DROPPED (reset, or closed before a whole answer), NO_ANSWER (the request timed out),
    REFUSED (the connection was refused), UNRESOLVED (the host's name did not resolve), or None (not worth trying
    again). `status`
    and `code` are the answer's, `reason` the OS's words, `retries` the tries the client made after the first."""

    __slots__ = ()

    @property
    def transient(self) -> bool:
        return self.how is not None


def read_failure(text: str) -> Failure:
    """The Failure an obstore error's text describes (its message and its debug dump of the cause)."""
    import re

    status_match = re.search(r"status code: (\d{3})", text)
    status = int(status_match.group(1)) if status_match else None
    code_match = re.search(r"<Code>([^<]+)</Code>", text) or re.search(r'"reason":\s*"([^"]+)"', text)
    code = code_match.group(1) if code_match else None
    retries_match = re.search(r"\bretries: (\d+),", text) or re.search(r"after (\d+) retries", text)
    retries = int(retries_match.group(1)) if retries_match else 0
    reason_match = re.search(r'message: "([^"]+)"', text)
    reason = reason_match.group(1) if reason_match else None
    if status is not None:
        how = OVERLOADED if status in RETRYABLE_STATUSES or code in RETRYABLE_CODES else None
        return Failure(how, status, code, reason, retries)
    kind_match = re.search(r"HttpError \{\s*kind: (\w+)", text)
    kind = kind_match.group(1) if kind_match else None
    if "dns error" in text or "failed to lookup address" in text:
        return Failure(UNRESOLVED, None, None, "name not resolved", retries)
    if kind == "Timeout" or (kind is None and re.search(r"timed out|kind: TimedOut", text)):
        return Failure(NO_ANSWER, None, None, reason or "timed out", retries)
    if kind == "Connect" or "ConnectionRefused" in text:
        return Failure(REFUSED, None, None, reason or "connection refused", retries)
    if kind in ("Interrupted", "Request") or "response body error" in text or "connection closed" in text:
        return Failure(DROPPED, None, None, reason or _dropped_words(text), retries)
    return Failure(None, None, None, reason, retries)


def _dropped_words(text: str) -> str:
    if "IncompleteMessage" in text or "connection closed before message completed" in text:
        return "connection closed before the answer was complete"
    if "body" in text:
        return "the answer's body was cut short"
    return "connection dropped"


class Budget:
    """The tries of one call and their bound. `spend(n)` counts n tries made; `pause()` is the wait before the next
    one, or None when the bound allows no more."""

    __slots__ = ("max_retries", "retry_timeout", "timeout", "tries", "started", "_last", "_clock")

    def __init__(self, max_retries: int, retry_timeout: float, timeout: float | None = None, clock=time.monotonic):
        self.max_retries, self.retry_timeout, self.timeout, self._clock = max_retries, retry_timeout, timeout, clock
        self.tries, self.started, self._last = 0, clock(), 0.0

    def spend(self, tries: int = 1) -> None:
        self.tries += tries

    @property
    def elapsed(self) -> float:
        return self._clock() - self.started

    @property
    def out_of_tries(self) -> bool:
        return self.tries > self.max_retries

    def pause(self) -> float | None:
        left = self.retry_timeout - self.elapsed
        if self.out_of_tries or left <= 0:
            return None
        self._last = backoff(self._last)
        return min(self._last, left)

    def summary(self) -> str:
        """"5 tries over 0.7 s"."""
        return f"{self.tries} {'try' if self.tries == 1 else 'tries'} over {self.elapsed:.1f} s"

    def bound_hint(self) -> str:
        """Which setting stopped the tries, as advice."""
        return "raise max_retries in STADO_CONFIG" if self.out_of_tries else "raise retry_timeout in STADO_CONFIG"


def backoff(previous: float) -> float:
    """The next wait: obstore's rule (see the module's docstring), with jitter that needs no `random` import."""
    if previous <= 0:
        return INIT_BACKOFF
    share = int.from_bytes(os.urandom(4), "big") / 2 ** 32
    return min(MAX_BACKOFF, INIT_BACKOFF + share * (previous * BASE - INIT_BACKOFF))


def unwell(failure: Failure, where: str, budget: Budget, timeout: float | None = None) -> StoreUnavailable:
    """The one line for a failure that may pass, once the bound allows no more tries: what the store answered (or
    that it did not), how many tries over how long, and what to do. "cannot reach" only where nothing answered."""
    tries, advice = budget.summary(), budget.bound_hint()
    if failure.how == OVERLOADED:
        said = " ".join(str(part) for part in (failure.status, failure.code or _REASONS.get(failure.status)) if part)
        return StoreUnwell(f"{where} answered {said} to {tries}: it (or a proxy on the way) is overloaded or unwell; "
                           f"try again later, or {advice}")
    if failure.how == DROPPED:
        return StoreUnwell(f"{where} dropped the connection ({failure.reason}) on {tries}: the server or a proxy on "
                           f"the way is unwell; try again later, or {advice}")
    if failure.how == NO_ANSWER:
        within = f" within the {timeout:g} s request timeout" if timeout else ""
        return StoreUnwell(f"cannot reach {where}: no answer{within} ({tries}); check that the server is up, or raise "
                           "timeout in STADO_CONFIG")
    words = failure.reason or "connection refused"
    error = StoreUnwell if failure.how == REFUSED else StoreUnavailable
    return error(f"cannot reach {where} ({words.lower()}, {tries}): check the endpoint in STADO_CONFIG and that the "
                 "server is up")


_REASONS = {408: "Request Timeout", 429: "Too Many Requests", 500: "Internal Server Error", 502: "Bad Gateway",
            503: "Service Unavailable", 504: "Gateway Timeout"}


def obstore_budget(failure: Failure, text: str) -> Budget:
    """A Budget standing for the tries one obstore call made, as its error reports them."""
    import re

    budget = Budget(failure.retries, 0.0)
    budget.spend(1 + failure.retries)
    elapsed = re.search(r"\belapsed: ([\d.]+)(ms|µs|ns|s)\b", text)
    if elapsed:
        scale = {"s": 1.0, "ms": 1e-3, "µs": 1e-6, "ns": 1e-9}[elapsed.group(2)]
        budget.started -= float(elapsed.group(1)) * scale
    return budget
