"""A throttling TCP proxy for the tests: a slow (or stalled) link between a client and a real server.

    with ThrottledProxy(("127.0.0.1", 8333), rate=5_000_000) as proxy:
        options = {**seaweedfs.options, "endpoint": proxy.endpoint}

`rate` (bytes per second, each direction, shared by every connection: one link) can be changed while
it runs; None means unthrottled. `stall()` stops forwarding in both directions (connections stay open,
bytes wait), `resume()` lets them go again; `stall(bulk_over=N)` stalls only the connections that have
carried more than N bytes from the server (a transfer stops moving; small requests still pass). `down` and `up` count the bytes forwarded from the server
and to it, so a test can tell a resumed download from one started again at zero. `tap(direction, data, carried)`, if
given, sees every piece read ("up": from the client) before it is forwarded, with its connection's own dict
(bench/s3wire.py parses the requests and answers that way).
"""
import socket
import threading
import time

PIECE = 16 * 1024


class _Bucket:
    """A token bucket: take(n) waits until n bytes may pass at `rate` bytes/s (a burst of 1/20 s)."""

    def __init__(self, proxy):
        self.proxy = proxy
        self.lock = threading.Lock()
        self.tokens = 0.0
        self.at = time.monotonic()

    def take(self, n: int) -> None:
        while True:
            rate = self.proxy.rate
            with self.lock:
                now = time.monotonic()
                if rate is None:
                    self.at = now
                    return
                self.tokens = min(self.tokens + (now - self.at) * rate, max(rate / 20, PIECE))
                self.at = now
                if self.tokens >= n:
                    self.tokens -= n
                    return
                wait = (n - self.tokens) / rate
            time.sleep(min(wait, 0.05))


class ThrottledProxy:
    def __init__(self, target: tuple[str, int], rate: float | None = None, tap=None):
        self.target, self.rate, self.tap = target, rate, tap
        self.down = self.up = 0
        self._moving = threading.Event()
        self._moving.set()
        self._bulk_over: int | None = None
        self._count = threading.Lock()
        self._buckets = {"down": _Bucket(self), "up": _Bucket(self)}
        self._sockets: list[socket.socket] = []
        self._closed = False
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self._accept, daemon=True, name="throttle-accept").start()

    @classmethod
    def for_endpoint(cls, endpoint: str, rate: float | None = None) -> "ThrottledProxy":
        """A proxy in front of http://HOST:PORT[/path]; its .endpoint_for(endpoint) keeps the path."""
        host_port = endpoint.split("://", 1)[1].split("/", 1)[0]
        host, port = host_port.rsplit(":", 1)
        return cls((host, int(port)), rate)

    def endpoint_for(self, endpoint: str) -> str:
        rest = endpoint.split("://", 1)[1]
        path = rest[len(rest.split("/", 1)[0]):]
        return self.endpoint + path

    def stall(self, bulk_over: int | None = None) -> None:
        self._bulk_over = bulk_over
        self._moving.clear()

    def resume(self) -> None:
        self._moving.set()

    def _wait_moving(self, carried: dict) -> None:
        while not self._moving.is_set():
            if self._bulk_over is not None and carried["down"] <= self._bulk_over:
                return
            self._moving.wait(0.05)

    def close(self) -> None:
        self._closed = True
        self._moving.set()
        for sock in [self._listener, *self._sockets]:
            try:
                sock.close()
            except OSError:
                pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.target, timeout=10)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            self._sockets += [client, server]
            carried = {"up": 0, "down": 0}  # this connection's bytes
            threading.Thread(target=self._pump, args=(client, server, "up", carried), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, "down", carried), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, direction: str, carried: dict) -> None:
        bucket = self._buckets[direction]
        try:
            while True:
                data = src.recv(PIECE)
                if not data:
                    break
                if self.tap is not None:
                    self.tap(direction, data, carried)
                for i in range(0, len(data), 4096):
                    piece = data[i:i + 4096]
                    self._wait_moving(carried)
                    bucket.take(len(piece))
                    self._wait_moving(carried)
                    if self._closed:
                        return
                    dst.sendall(piece)
                    with self._count:
                        setattr(self, direction, getattr(self, direction) + len(piece))
                        carried[direction] += len(piece)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
