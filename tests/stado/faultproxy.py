"""A fault-injecting HTTP proxy between stado's clients and an S3 server: a store that is unwell, for the tests.

    with FaultProxy.for_endpoint(seaweedfs.endpoint, bucket="stado", store_prefix="t-1a2b") as proxy:
        options = {**seaweedfs.options, "endpoint": proxy.endpoint}
        proxy.add(Rule("commit_then_lose", kinds=("create",), rate=0.5))
        ...
        [exchange] = proxy.exchanges(kind="create", key="queue/j1.json")
        exchange.lost         # the server committed it; the client was told something else

It speaks HTTP/1.1 to both sides (keep-alive, Content-Length or chunked bodies), one upstream connection per
client connection, and forwards a request's bytes unchanged: the client signed them for the proxy's host:port,
and the server checks that signature. Each request is classified by kind (KINDS) and key, and the first rule
that matches it and fires (its `rate`, drawn from a seeded RNG) decides what happens:

- `commit_then_lose`: the request is forwarded and the server answers (so it commits); the client is told
  instead a 503 SlowDown or a 500 InternalError (S3's XML error bodies), has its connection reset, or gets a
  garbled answer (a cut status line, headers cut short, or a body shorter than its Content-Length), then the
  connection closes. Nothing obstore sees says the request landed. (Headers cut short leave the status line
  whole: a lenient client, such as Python's http.client, which takes the end of the stream for the end of the
  headers, reads the real status there.)
- `fail_before`: the client gets a 503, a 500, a reset or a garbled answer and nothing is forwarded.
- `delay`: the answer is held for a random time in `delay` seconds before it is passed on. Requests on other
  connections go on meanwhile, so answers arrive in another order than their requests.

`storm(seconds)` answers every request 503 SlowDown, unforwarded, until it ends (`calm()` ends it early);
`with proxy.burst(rate=1.0, seconds=10):` makes every rule fire at that rate until the block ends or the
seconds pass. Rules can be changed from any thread while the proxy runs. `ledger` holds every exchange: its
kind and key, whether it was forwarded, what the server answered and what the client was told.
"""
import random
import socket
import struct
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from urllib.parse import parse_qsl, unquote, urlsplit

KINDS = ("create", "cas", "put", "get", "head", "list", "delete_if_match", "delete")
FAULTS = ("commit_then_lose", "fail_before", "delay")
ANSWERS = ("503", "500", "reset", "garble")
# Answers a rule may also name: the other statuses S3, GCS and Azure document as worth trying again.
MORE_ANSWERS = ("429", "502", "504", "408")
GARBLES = ("cut_status", "cut_headers", "short_body")
# Far above any request a test makes: an upstream that says nothing for this long has died.
UPSTREAM_TIMEOUT = 120.0
_ERRORS = {"503": (503, "Service Unavailable", "SlowDown", "Please reduce your request rate."),
           "500": (500, "Internal Server Error", "InternalError", "We encountered an internal error. Please try again."),
           "429": (429, "Too Many Requests", "TooManyRequests", "Please reduce your request rate."),
           "502": (502, "Bad Gateway", "BadGateway", "The gateway could not reach the server."),
           "504": (504, "Gateway Timeout", "GatewayTimeout", "The server did not answer the gateway in time."),
           "408": (408, "Request Timeout", "RequestTimeout", "Your socket connection to the server was not read "
                   "from or written to within the timeout period.")}


@dataclass
class Rule:
    fault: str
    kinds: tuple[str, ...] = KINDS
    rate: float = 1.0
    prefix: str | None = None       # only keys under it (relative to the store prefix)
    answers: tuple[str, ...] = ANSWERS  # what a commit_then_lose or fail_before tells the client
    delay: tuple[float, float] = (0.5, 3.0)
    garbles: tuple[str, ...] = GARBLES  # how a "garble" answer is garbled
    limit: int | None = None        # fires at most this many times
    where: Callable[[str, str], bool] | None = None  # (method, target) -> whether the rule applies to the request
    fired: int = 0

    def __post_init__(self):
        if self.fault not in FAULTS:
            raise ValueError(f"unknown fault {self.fault!r}: choose from {FAULTS}")
        if isinstance(self.kinds, str):
            self.kinds = (self.kinds,)
        unknown = (set(self.kinds) - set(KINDS) or set(self.answers) - set(ANSWERS + MORE_ANSWERS)
                   or set(self.garbles) - set(GARBLES))
        if unknown:
            raise ValueError(f"unknown kind or answer {sorted(unknown)}")

    def matches(self, kind: str, key: str | None, method: str, target: str) -> bool:
        if kind not in self.kinds or (self.limit is not None and self.fired >= self.limit):
            return False
        if self.where is not None and not self.where(method, target):
            return False
        return self.prefix is None or (key is not None and key.startswith(self.prefix))


@dataclass
class Exchange:
    """One request and what became of it."""

    seq: int
    kind: str
    method: str
    target: str
    key: str | None
    at: float                          # time.monotonic() when its head arrived
    fault: str | None = None           # the rule's fault, or "storm"
    forwarded: bool = False
    server_status: int | None = None   # what the server answered (None: not forwarded, or no answer)
    told: str = ""                     # what the client was told: "passed", "503", "500", "reset", "garble:<how>"
    client_status: int | None = None   # the status the client could read (None: no whole answer)
    held: float = 0.0                  # seconds the answer was held back (delay)
    done: float | None = None

    @property
    def committed(self) -> bool:
        """The server accepted it (a 2xx): the write landed, whatever the client was told."""
        return self.server_status is not None and 200 <= self.server_status < 300

    @property
    def lost(self) -> bool:
        """It landed, but the client was told otherwise (or nothing it could read)."""
        return self.committed and self.told != "passed"


class _Closed(Exception):
    """The peer closed the connection (or it broke) before a whole message came."""


class _Message:
    """A request or a response as it crossed the wire: its raw bytes (head and body, framing included)."""

    def __init__(self, first_line: str, headers: dict[str, str], raw: bytes, head_size: int):
        self.first_line, self.headers, self.raw, self.head_size = first_line, headers, raw, head_size

    @property
    def body(self) -> bytes:
        return self.raw[self.head_size:]

    def keeps_alive(self) -> bool:
        return "close" not in self.headers.get("connection", "").lower()


def _read_head(reader) -> tuple[str, dict[str, str], bytes]:
    lines = []
    while True:
        line = reader.readline(65537)
        if not line:
            raise _Closed()
        lines.append(line)
        if line in (b"\r\n", b"\n"):
            break
    first = lines[0].decode("latin-1").rstrip("\r\n")
    headers = {}
    for line in lines[1:-1]:
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    return first, headers, b"".join(lines)


def _read_exact(reader, n: int) -> bytes:
    data = reader.read(n)
    if len(data) < n:
        raise _Closed()
    return data


def _read_body(reader, headers: dict[str, str], until_close: bool) -> bytes:
    if "chunked" in headers.get("transfer-encoding", "").lower():
        parts = []
        while True:
            size_line = reader.readline(65537)
            if not size_line:
                raise _Closed()
            parts.append(size_line)
            size = int(size_line.split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while True:  # trailers, up to the empty line
                    trailer = reader.readline(65537)
                    if not trailer:
                        raise _Closed()
                    parts.append(trailer)
                    if trailer in (b"\r\n", b"\n"):
                        return b"".join(parts)
            parts.append(_read_exact(reader, size + 2))
    if "content-length" in headers:
        return _read_exact(reader, int(headers["content-length"]))
    return reader.read() if until_close else b""


def read_request(reader) -> _Message:
    first, headers, head = _read_head(reader)
    return _Message(first, headers, head + _read_body(reader, headers, until_close=False), len(head))


def read_response(reader, method: str) -> _Message:
    """The final answer to a request of `method` (interim 1xx answers are read and dropped)."""
    while True:
        first, headers, head = _read_head(reader)
        try:
            status = int(first.split(" ", 2)[1])
        except (IndexError, ValueError):
            raise _Closed() from None
        if 100 <= status < 200:
            continue
        if method == "HEAD" or status in (204, 304):
            return _Message(first, headers, head, len(head))
        return _Message(first, headers, head + _read_body(reader, headers, until_close=True), len(head))


def status_of(message: _Message) -> int:
    return int(message.first_line.split(" ", 2)[1])


def classify(method: str, target: str, headers: dict[str, str], body: bytes, bucket: str,
             store_prefix: str = "") -> tuple[str, str | None]:
    """(kind, key relative to `store_prefix`; None outside it). A list's key is the prefix it lists; a bulk
    delete's (POST ?delete) the first key its body names."""
    import re
    from html import unescape

    split = urlsplit(target)
    path, query = unquote(split.path), dict(parse_qsl(split.query, keep_blank_values=True))
    inside = f"{store_prefix.strip('/')}/" if store_prefix.strip("/") else ""

    def relative(full: str) -> str | None:
        return full[len(inside):] if full.startswith(inside) else None

    if method == "POST" and "delete" in query:
        named = re.findall(rb"<Key>([^<]*)</Key>", body)
        return "delete", relative(unescape(named[0].decode())) if named else None
    if method == "GET" and ("list-type" in query or path.rstrip("/") == f"/{bucket}"):
        listed = query.get("prefix", "")
        return "list", relative(listed) if listed.startswith(inside) else ("" if listed + "/" == inside else None)
    key = relative(path[len(f"/{bucket}/"):]) if path.startswith(f"/{bucket}/") else None
    if method == "PUT":
        if headers.get("if-none-match", "").strip() == "*":
            return "create", key
        return ("cas" if "if-match" in headers else "put"), key
    if method == "POST":
        return "put", key  # multipart: start, complete
    if method == "DELETE":
        return ("delete_if_match" if "if-match" in headers else "delete"), key
    return ("head" if method == "HEAD" else "get"), key


def error_answer(which: str, resource: str, request_id: str, keep_alive: bool = True) -> bytes:
    status, reason, code, text = _ERRORS[which]
    body = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code><Message>{text}</Message>'
            f"<Resource>{resource}</Resource><RequestId>{request_id}</RequestId></Error>").encode()
    close = "" if keep_alive else "Connection: close\r\n"
    head = (f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/xml\r\nContent-Length: {len(body)}\r\n"
            f"x-amz-request-id: {request_id}\r\n{close}\r\n")
    return head.encode() + body


def garbled(how: str, answer: _Message | None) -> bytes:
    """The start of an answer that never ends: the connection closes after these bytes."""
    real = answer.raw if answer is not None else error_answer("500", "/", "garbled", keep_alive=False)
    if how == "cut_status":
        return real[:min(10, real.index(b"\r\n"))]  # "HTTP/1.1 2"
    if how == "cut_headers":
        end = real.index(b"\r\n\r\n")
        return real[:max(real.index(b"\r\n") + 2, end // 2)]
    # short_body: a body that stops half-way; an answer with no body to cut gets an error whose body is cut
    if answer is None or len(answer.body) < 2 or "content-length" not in answer.headers:
        real = error_answer("500", "/", "garbled", keep_alive=False)
        head_end = real.index(b"\r\n\r\n") + 4
        return real[:head_end + (len(real) - head_end) // 2]
    return answer.raw[:answer.head_size + len(answer.body) // 2]


def _reset(sock: socket.socket) -> None:
    """Close with an RST (SO_LINGER 0), as a server or a load balancer that drops the connection does."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    _close(sock)


def _close(sock: socket.socket | None) -> None:
    if sock is None:
        return
    try:
        sock.close()
    except OSError:
        pass


class FaultProxy:
    def __init__(self, target: tuple[str, int], *, bucket: str, store_prefix: str = "", seed: int = 0):
        self.target, self.bucket, self.store_prefix = target, bucket, store_prefix
        self.ledger: list[Exchange] = []
        self._rules: list[Rule] = []
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._storm_until = 0.0
        self._burst: tuple[float, float] | None = None  # (rate, until)
        self._sockets: set[socket.socket] = set()
        self._closed = False
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._acceptor = threading.Thread(target=self._accept, daemon=True, name="faultproxy-accept")
        self._acceptor.start()

    @classmethod
    def for_endpoint(cls, endpoint: str, **kwargs) -> "FaultProxy":
        host, port = endpoint.split("://", 1)[1].split("/", 1)[0].rsplit(":", 1)
        return cls((host, int(port)), **kwargs)

    # -- rules ----------------------------------------------------------------------------------------

    def add(self, rule: Rule) -> Rule:
        with self._lock:
            self._rules = [*self._rules, rule]
        return rule

    def set_rules(self, rules: list[Rule]) -> None:
        with self._lock:
            self._rules = list(rules)

    def clear(self) -> None:
        """No rule, no storm, no burst: every request passes."""
        with self._lock:
            self._rules, self._storm_until, self._burst = [], 0.0, None

    def storm(self, seconds: float) -> None:
        """Every request answered 503 SlowDown, unforwarded, for `seconds` from now."""
        with self._lock:
            self._storm_until = time.monotonic() + seconds

    def calm(self) -> None:
        with self._lock:
            self._storm_until = 0.0

    @property
    def storming(self) -> bool:
        return time.monotonic() < self._storm_until

    @contextmanager
    def burst(self, rate: float = 1.0, seconds: float | None = None):
        """Every rule fires at `rate` until the block ends (or `seconds` pass, if given)."""
        with self._lock:
            self._burst = (rate, float("inf") if seconds is None else time.monotonic() + seconds)
        try:
            yield self
        finally:
            with self._lock:
                self._burst = None

    def _decide(self, kind: str, key: str | None, method: str, target: str) -> tuple[Rule | None, str | None]:
        """(the rule that fires, or None; "storm" during a storm)."""
        with self._lock:
            now = time.monotonic()
            if now < self._storm_until:
                return None, "storm"
            burst = self._burst if self._burst is not None and now < self._burst[1] else None
            for rule in self._rules:
                if rule.matches(kind, key, method, target) and self._rng.random() < (rule.rate if burst is None else burst[0]):
                    rule.fired += 1
                    return rule, rule.fault
            return None, None

    def _draw(self, choices):
        with self._lock:
            return self._rng.choice(list(choices))

    def _uniform(self, low: float, high: float) -> float:
        with self._lock:
            return self._rng.uniform(low, high)

    # -- the ledger -----------------------------------------------------------------------------------

    def exchanges(self, kind: str | None = None, key: str | None = None) -> list[Exchange]:
        with self._lock:
            return [e for e in self.ledger if (kind is None or e.kind == kind) and (key is None or e.key == key)]

    def lost(self, kind: str | None = None) -> list[Exchange]:
        """Exchanges that landed though their client was told otherwise."""
        return [e for e in self.exchanges(kind) if e.lost]

    # -- life ----------------------------------------------------------------------------------------

    def close(self) -> None:
        self._closed = True
        with self._lock:
            self._storm_until = 0.0
            sockets, self._sockets = list(self._sockets), set()
        for sock in [self._listener, *sockets]:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            _close(sock)
        self._acceptor.join(5)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _track(self, sock: socket.socket) -> socket.socket:
        with self._lock:
            self._sockets.add(sock)
        return sock

    def _untrack(self, sock: socket.socket | None) -> None:
        if sock is not None:
            with self._lock:
                self._sockets.discard(sock)
            _close(sock)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            self._track(client)
            threading.Thread(target=self._serve, args=(client,), daemon=True, name="faultproxy-conn").start()

    # -- one client connection -------------------------------------------------------------------------

    def _serve(self, client: socket.socket) -> None:
        upstream: socket.socket | None = None
        up_reader = None
        reader = client.makefile("rb")
        try:
            while not self._closed:
                try:
                    request = read_request(reader)
                except (_Closed, OSError, ValueError):
                    return
                method, target = (request.first_line.split(" ", 2) + ["", ""])[:2]
                kind, key = classify(method, target, request.headers, request.body, self.bucket, self.store_prefix)
                with self._lock:
                    exchange = Exchange(len(self.ledger), kind, method, target, key, time.monotonic())
                    self.ledger.append(exchange)
                rule, fault = self._decide(kind, key, method, target)
                exchange.fault = fault
                if fault in ("storm", "fail_before"):
                    which = "503" if fault == "storm" else self._draw(rule.answers if rule else ("503",))
                    if not self._tell(client, exchange, which, None, target, rule):
                        return
                    continue
                if upstream is None:
                    try:
                        upstream = self._track(socket.create_connection(self.target, timeout=UPSTREAM_TIMEOUT))
                    except OSError:
                        exchange.told, exchange.done = "reset", time.monotonic()
                        _reset(client)
                        return
                    up_reader = upstream.makefile("rb")
                exchange.forwarded = True
                try:
                    upstream.sendall(request.raw)
                    answer = read_response(up_reader, method)
                except (_Closed, OSError, ValueError):
                    # The server dropped the connection: the client learns it the same way.
                    exchange.told, exchange.done = "reset", time.monotonic()
                    _reset(client)
                    return
                exchange.server_status = status_of(answer)
                if not answer.keeps_alive():
                    self._untrack(upstream)
                    upstream = up_reader = None
                if fault == "delay":
                    exchange.held = self._uniform(*rule.delay)
                    time.sleep(exchange.held)  # the fault itself: the answer is late
                if fault == "commit_then_lose":
                    if not self._tell(client, exchange, self._draw(rule.answers), answer, target, rule):
                        return
                    continue
                exchange.told, exchange.client_status = "passed", exchange.server_status
                try:
                    client.sendall(answer.raw)
                except OSError:
                    return
                finally:
                    exchange.done = time.monotonic()
                if not (request.keeps_alive() and answer.keeps_alive()):
                    return
        finally:
            self._untrack(upstream)
            self._untrack(client)

    def _tell(self, client: socket.socket, exchange: Exchange, which: str, answer: _Message | None,
              target: str, rule: Rule | None) -> bool:
        """Give the client `which` instead of the server's answer; whether the connection stays open."""
        try:
            if which in _ERRORS:
                exchange.told, exchange.client_status = which, _ERRORS[which][0]
                client.sendall(error_answer(which, urlsplit(target).path, f"fault-{exchange.seq}"))
                return True
            if which == "reset":
                exchange.told = "reset"
                _reset(client)
                return False
            how = self._draw(rule.garbles if rule is not None else GARBLES)
            exchange.told = f"garble:{how}"
            client.sendall(garbled(how, answer))
            client.shutdown(socket.SHUT_WR)
            return False
        except OSError:
            return False
        finally:
            exchange.done = time.monotonic()


def for_target(target, *, seed: int = 0) -> FaultProxy:
    """A proxy in front of an s3 StoreTarget's server (storekit.StoreTarget), classifying keys of its prefix."""
    bucket, _, prefix = target.url.split("://", 1)[1].partition("/")
    return FaultProxy.for_endpoint(target.options["endpoint"], bucket=bucket, store_prefix=prefix, seed=seed)


def through(target, proxy: FaultProxy, **options):
    """The same StoreTarget reached through `proxy`, with `options` (max_retries, timeout, ...) on top."""
    from dataclasses import replace

    return replace(target, options={**target.options, "endpoint": proxy.endpoint, **options})
