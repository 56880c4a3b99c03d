"""A counting HTTP proxy in front of an S3 server: every request that crosses it, as the server saw it.

    wire = WireCounter(("127.0.0.1", 8333))
    endpoint = wire.listen("agent")     # http://127.0.0.1:PORT: the endpoint of that role's STADO_CONFIG
    ...
    wire.requests                       # [Request], in the order their heads reached the proxy
    wire.close()

Each role (the submitter, an agent, a reader, ...) gets a listener of its own, so a request is told apart by
the port it came in on, not by guessing from its key. Bytes are forwarded unchanged (the client signed them
for the proxy's host:port, and the server checks that signature), and parsed on the way: the request line and
headers, the body's framing (Content-Length or chunked) to find where the next request on a kept-alive
connection starts, and the answer's status line. Nothing is mocked: the server answers every request.

`classify` names what an S3 request is: PUT, GET, HEAD, LIST (a GET of the bucket with list-type), DELETE (a
bulk delete, POST ?delete, included) or POST (multipart), and the key (or the listed prefix) relative to a store
prefix. The forwarding itself is tests/stado/throttle.py's proxy, unthrottled, with a tap that parses.
"""
import re
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from html import unescape
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.stado.throttle import ThrottledProxy

# The headers that say what a request is for (its conditions, its range); the rest is signing and framing.
KEPT_HEADERS = ("if-match", "if-none-match", "range", "content-length")


@dataclass
class Request:
    role: str
    seq: int
    at: float                 # time.monotonic() when its head reached the proxy
    method: str
    target: str               # as sent: path and query
    headers: dict = field(default_factory=dict)
    status: int | None = None  # the answer's status (None: no answer before the connection ended)
    answered: float | None = None
    body: bytes = b""          # kept only for a bulk delete (POST ?delete), whose body names the keys

    @property
    def path(self) -> str:
        return unquote(urlsplit(self.target).path)

    @property
    def query(self) -> dict:
        return dict(parse_qsl(urlsplit(self.target).query, keep_blank_values=True))


def classify(request: Request, bucket: str, store_prefix: str = "") -> tuple[str, str | None]:
    """(kind, key relative to `store_prefix`): kind is PUT, GET, HEAD, LIST, DELETE or POST; the key is None for
    a request outside the prefix (another scenario's, or the bucket itself). A LIST's key is the prefix listed,
    ending in '/' (or '' for the whole store). A bulk delete (POST /bucket?delete, S3's DeleteObjects: what
    obstore sends for a plain delete) is a DELETE of the key its body names (the first, if several)."""
    inside = store_prefix.strip("/") + "/" if store_prefix.strip("/") else ""
    query = request.query
    if request.method == "POST" and "delete" in query:
        named = re.findall(rb"<Key>([^<]*)</Key>", request.body)
        key = unescape(named[0].decode()) if named else ""
        return "DELETE", key[len(inside):] if key.startswith(inside) else None
    if request.method == "GET" and ("list-type" in query or request.path.rstrip("/") == f"/{bucket}"):
        listed = query.get("prefix", "")
        if listed.startswith(inside):
            return "LIST", listed[len(inside):]
        return "LIST", "" if listed + "/" == inside else None
    base = f"/{bucket}/{inside}"
    return request.method, request.path[len(base):] if request.path.startswith(base) else None


class _Framing:
    """Where each HTTP/1.1 message ends in a byte stream: heads are handed to `on_head`, which answers how
    the body that follows is framed: ("length", n), ("chunked",), ("none",) or ("close",) (until the end),
    and optionally a function that is given the body's bytes (a length-framed body only)."""

    def __init__(self, on_head):
        self.on_head = on_head
        self.buf = bytearray()
        self.state, self.left, self.sink = "head", 0, None

    def feed(self, data: bytes) -> None:
        self.buf += data
        while self.buf:
            if self.state == "head":
                end = self.buf.find(b"\r\n\r\n")
                if end < 0:
                    return
                head = bytes(self.buf[:end])
                del self.buf[:end + 4]
                framing = self.on_head(head)
                if framing[0] == "length" and framing[1] > 0:
                    self.state, self.left = "body", framing[1]
                    self.sink = framing[2] if len(framing) > 2 else None
                elif framing[0] == "chunked":
                    self.state = "size"
                elif framing[0] == "close":
                    self.state = "close"
            elif self.state in ("body", "chunk"):
                took = min(self.left, len(self.buf))
                if self.state == "body" and self.sink is not None:
                    self.sink(bytes(self.buf[:took]))
                del self.buf[:took]
                self.left -= took
                if self.left:
                    return
                self.state = "head" if self.state == "body" else "chunk-end"
            elif self.state == "chunk-end":
                if len(self.buf) < 2:
                    return
                del self.buf[:2]
                self.state = "size"
            elif self.state == "size":
                end = self.buf.find(b"\r\n")
                if end < 0:
                    return
                size = int(bytes(self.buf[:end]).split(b";")[0].strip() or b"0", 16)
                del self.buf[:end + 2]
                self.state, self.left = ("trailer", 0) if size == 0 else ("chunk", size)
            elif self.state == "trailer":
                end = self.buf.find(b"\r\n")
                if end < 0:
                    return
                empty = end == 0
                del self.buf[:end + 2]
                if empty:
                    self.state = "head"
            else:  # "close": the rest of the stream is one body
                self.buf.clear()


def _headers(head: bytes) -> tuple[str, dict]:
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return lines[0], headers


def _body_framing(headers: dict) -> tuple:
    if "chunked" in headers.get("transfer-encoding", "").lower():
        return ("chunked",)
    if "content-length" in headers:
        return ("length", int(headers["content-length"]))
    return None


class WireCounter:
    def __init__(self, target: tuple[str, int]):
        self.target = target
        self.requests: list[Request] = []
        self.unparsed = 0  # connections whose bytes could not be parsed (then only forwarded)
        self._lock = threading.Lock()
        self._proxies: dict[str, ThrottledProxy] = {}

    @classmethod
    def for_endpoint(cls, endpoint: str) -> "WireCounter":
        host, port = endpoint.split("://", 1)[1].split("/", 1)[0].rsplit(":", 1)
        return cls((host, int(port)))

    def listen(self, role: str) -> str:
        """The endpoint (http://127.0.0.1:PORT) whose requests are counted as `role`'s (one listener per role)."""
        if role not in self._proxies:
            self._proxies[role] = ThrottledProxy(self.target, tap=lambda direction, data, carried, role=role:
                                                 self._tap(role, direction, data, carried))
        return self._proxies[role].endpoint

    def close(self) -> None:
        for proxy in self._proxies.values():
            proxy.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _tap(self, role: str, direction: str, data: bytes, carried: dict) -> None:
        """Every piece a connection carries, before it is forwarded: a request is recorded before its answer
        can come back. The connection's parsers live in its own dict (both directions share its deque of
        requests not answered yet)."""
        with self._lock:
            wire = carried.get("wire")
            if wire is None:
                pending: deque[Request] = deque()
                wire = carried["wire"] = {
                    "up": _Framing(lambda head: self._request(head, role, pending)),
                    "down": _Framing(lambda head: self._answer(head, pending))}
        if wire.get("broken"):
            return
        try:
            wire[direction].feed(data)
        except (ValueError, IndexError):
            wire["broken"] = True  # not HTTP as expected: forwarded all the same, no longer counted
            with self._lock:
                self.unparsed += 1

    def _request(self, head: bytes, role: str, pending: deque) -> tuple:
        line, headers = _headers(head)
        method, target, _ = (line.split(" ", 2) + ["", ""])[:3]
        with self._lock:
            request = Request(role, len(self.requests), time.monotonic(), method, target,
                              {k: v for k, v in headers.items() if k in KEPT_HEADERS})
            self.requests.append(request)
        pending.append(request)
        framing = _body_framing(headers) or ("none",)
        if method == "POST" and framing[0] == "length" and framing[1] <= 1 << 20:
            framing += (lambda data: setattr(request, "body", request.body + data),)
        return framing

    def _answer(self, head: bytes, pending: deque) -> tuple:
        line, headers = _headers(head)
        try:
            status = int(line.split(" ", 2)[1])
        except (IndexError, ValueError):
            status = 0
        if 100 <= status < 200:
            return ("none",)  # an interim answer (100 Continue): the real one follows
        request = pending.popleft() if pending else None
        if request is not None:
            request.status, request.answered = status, time.monotonic()
        if (request is not None and request.method == "HEAD") or status in (204, 304):
            return ("none",)
        return _body_framing(headers) or ("close",)
