"""The conditional DELETE of S3 and Azure: obstore signs it (a pre-signed URL, so the credentials stay in its hands)
and it is sent here with If-Match, by the standard library, under the policy of retries.py."""
import time

from .retries import DROPPED, NO_ANSWER, REFUSED, UNRESOLVED, Budget, Failure, read_failure, unwell

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable


def send_conditional_delete(signed: "Callable[[], str]", etag: str, timeout: float, budget: Budget,
                            where: str) -> tuple[int, str]:
    """DELETE a pre-signed URL (`signed()` gives a fresh one for each try) with If-Match: (status, start of the
    body). Tried again by the policy of retries.py: an answer worth trying again, a dropped or refused connection,
    no answer in time. If a try had landed and its answer was lost, the next one answers 404 or 412."""
    import http.client
    import urllib.error
    import urllib.request

    while True:
        request = urllib.request.Request(signed(), method="DELETE", headers={"If-Match": etag})
        cause: BaseException | None = None
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return response.status, ""
        except urllib.error.HTTPError as e:
            status, body = e.code, _start_of(e)
            failure = read_failure(f"status code: {status} {body}")
            if not failure.transient:
                return status, body
        except (OSError, http.client.HTTPException) as e:  # URLError, a reset, a timeout, a garbled answer
            failure, status, body, cause = _socket_failure(e), 0, "", e
        budget.spend()
        wait = budget.pause()
        if wait is None:
            if status:
                return status, body
            raise unwell(failure, where, budget, timeout) from cause
        time.sleep(wait)


def _start_of(answer) -> str:
    """The first bytes of an error answer's body, as text; what came, when the body is cut short."""
    import http.client

    try:
        return answer.read(300).decode(errors="replace")
    except (OSError, http.client.HTTPException) as cut:
        partial = getattr(cut, "partial", b"") or b""
        return partial[:300].decode(errors="replace")


def _socket_failure(error: BaseException) -> Failure:
    """What a failed urllib request met, in the policy's terms."""
    import http.client
    import socket
    import urllib.error

    reason = error.reason if isinstance(error, urllib.error.URLError) else error
    words = str(reason) or type(reason).__name__
    if isinstance(reason, socket.gaierror):
        return Failure(UNRESOLVED, None, None, "name not resolved", 0)
    if isinstance(reason, (TimeoutError, socket.timeout)):
        return Failure(NO_ANSWER, None, None, "timed out", 0)
    if isinstance(reason, ConnectionRefusedError):
        return Failure(REFUSED, None, None, "connection refused", 0)
    if isinstance(reason, (ConnectionError, http.client.HTTPException, EOFError)):
        return Failure(DROPPED, None, None, words if isinstance(reason, OSError) else
                       f"a garbled answer: {type(reason).__name__}", 0)
    return Failure(DROPPED, None, None, words, 0)
