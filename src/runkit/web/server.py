"""The dashboards' local web server: bind, guard, serve until Ctrl-C or SIGTERM.

Security, in one place for both tools:
- it binds 127.0.0.1 unless told otherwise (`--host`), and then says on stderr that others can reach it;
- a token made at each launch is carried in the printed URL; the first page load trades it for an HttpOnly,
  SameSite=Strict cookie (named after the port: cookies ignore ports, and two dashboards may run side by side)
  and drops it from the address bar. Every request but the static files needs it (a job's output is private
  too), and a state-changing one is also refused when its Origin or Referer is another origin: a page served
  from another port of the same host is same-site, so the cookie alone would not stop it;
- on loopback, a Host header that is not a loopback name is refused (DNS rebinding);
- every response forbids inline scripts (Content-Security-Policy) and framing.

A token file (TOOL_UI_TOKEN_FILE, e.g. JOBMAN_UI_TOKEN_FILE) keeps one token across restarts, so a printed URL and
an open page stay valid; without one a restarted server makes a new token, and a page or a reload that carries
the old one is told, in one line, to open the new URL (a readable page for a browser, JSON for a script).
"""
import asyncio
import hmac
import ipaddress
import os
import secrets
import signal
import socket
import sys
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import parse_qsl, urlencode

STATIC = Path(__file__).parent / "static"
LOOPBACK_NAMES = {"localhost", "127.0.0.1", "[::1]", "::1"}
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
SECURITY_HEADERS = [(b"content-security-policy", CSP.encode()), (b"x-content-type-options", b"nosniff"),
                    (b"x-frame-options", b"DENY"), (b"referrer-policy", b"same-origin"),
                    (b"cache-control", b"no-store")]
UNSAFE_METHODS = {"POST", "PUT", "PATCH", "DELETE"}
PUBLIC_PREFIXES = ("/static/", "/app/")  # the page's own code and styles: no job's data, so no token
TOKEN_HEADER = "x-ui-token"  # for scripts (curl): the same token, sent without a cookie


class LaunchError(Exception):
    """The server cannot start as asked (a bad host, a port in use): one line for the user."""


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on (host, port); port 0 takes a free one."""
    if not 0 <= port <= 65535:
        raise LaunchError(f"--port {port} is not a port: give 1-65535, or 0 for a free one")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as e:
        raise LaunchError(f"--host {host!r} cannot be resolved ({e.strerror}): give an address such as 127.0.0.1") \
            from None
    family, _, _, _, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as e:
        sock.close()
        raise LaunchError(f"cannot listen on {host} port {port}: {e.strerror}; choose another --port "
                          "(or leave it out for a free one)") from None
    sock.listen(128)
    sock.set_inheritable(False)
    return sock


class Launch:
    """One run of a dashboard: where it listens, its token, and the URL to print."""

    def __init__(self, sock: socket.socket, host: str, tool: str, token: str | None = None):
        self.sock, self.host, self.tool = sock, host, tool
        self.port = sock.getsockname()[1]
        self.token = token or secrets.token_urlsafe(24)
        self.cookie = f"{tool}_ui_{self.port}"
        self.loopback = is_loopback(host)

    @property
    def url(self) -> str:
        host = self.host
        if host in ("0.0.0.0", "::", ""):
            host = socket.gethostname()
        elif ":" in host and not host.startswith("["):
            host = f"[{host}]"
        return f"http://{host}:{self.port}/?{urlencode({'token': self.token})}"

    def warning(self) -> str | None:
        if self.loopback:
            return None
        return (f"{self.tool}: warning: listening on {self.host}, not only this machine: anyone who can reach port "
                f"{self.port} and learns the URL's token can read every job and act on it; use --host 127.0.0.1 "
                "(the default) unless you mean it")


class Guard:
    """ASGI middleware: the token, the origin check, the Host check and the security headers (see the module)."""

    def __init__(self, app, launch: Launch):
        self.app, self.launch = app, launch

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        host = headers.get("host", "")
        if self.launch.loopback and _host_name(host) not in LOOPBACK_NAMES:
            return await _refuse(send, 403, f"refused: Host {host!r} is not this machine's loopback address")
        path, method = scope["path"], scope["method"]
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        page = method == "GET" and not path.startswith("/api/")  # a browser's navigation: answered as a page
        if page and "token" in query:
            if not hmac.compare_digest(query["token"].encode(), self.launch.token.encode()):
                return await _refuse(send, 403, "refused: this token is not the one this dashboard printed at its "
                                                "start (it may have been restarted since); open the URL it printed",
                                     html=True, token=True)
            rest = urlencode({k: v for k, v in query.items() if k != "token"})
            cookie = f"{self.launch.cookie}={self.launch.token}; Path=/; HttpOnly; SameSite=Strict"
            return await _respond(send, 303, b"", [(b"location", (path + ("?" + rest if rest else "")).encode()),
                                                   (b"set-cookie", cookie.encode())])
        if not path.startswith(PUBLIC_PREFIXES):
            if not self._authorised(headers):
                return await _refuse(send, 403, f"refused: this request lacks the dashboard's token (or carries "
                                                f"one from before a restart); open the URL that `{self.launch.tool} "
                                                f"ui` printed", html=page, token=True)
            if method in UNSAFE_METHODS:
                problem = _cross_origin(headers, host)
                if problem:
                    return await _refuse(send, 403, f"refused: {problem}")

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                message = dict(message, headers=list(message.get("headers", [])) + SECURITY_HEADERS)
            await send(message)

        return await self.app(scope, receive, send_with_headers)

    def _authorised(self, headers: dict) -> bool:
        token = self.launch.token.encode()
        given = headers.get(TOKEN_HEADER) or _cookie(headers.get("cookie", ""), self.launch.cookie)
        return given is not None and hmac.compare_digest(given.encode("latin-1"), token)


def _host_name(host: str) -> str:
    if host.startswith("["):
        return host.split("]", 1)[0] + "]"
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _cookie(header: str, name: str) -> str | None:
    for part in header.split(";"):
        key, sep, value = part.strip().partition("=")
        if sep and key == name:
            return value
    return None


def _cross_origin(headers: dict, host: str) -> str | None:
    """Why a state-changing request comes from another origin (None: from this page, or from a client that is no
    browser and names no origin at all)."""
    mine = f"http://{host}"
    origin = headers.get("origin")
    if origin is not None:
        return None if origin == mine else f"a state-changing request from another origin ({origin!r})"
    referer = headers.get("referer")
    if referer is not None and not (referer == mine or referer.startswith(mine + "/")):
        return "a state-changing request referred by another origin"
    return None


async def _respond(send, status: int, body: bytes, headers=()):
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-length", str(len(body)).encode())] + list(headers) + SECURITY_HEADERS})
    await send({"type": "http.response.body", "body": body})


REFUSED_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>refused</title></head>
<body style="font: 15px/1.5 system-ui, sans-serif; margin: 3em auto; max-width: 46em; padding: 0 1em">
<h1 style="font-size: 19px">This dashboard did not accept the address</h1>
<p>{message}.</p>
</body></html>
"""


async def _refuse(send, status: int, message: str, *, html: bool = False, token: bool = False):
    """A refusal: JSON for a script or the page's requests ({"error", and "token": true when it is the token that
    is missing or stale}), a readable page for a browser's navigation."""
    import json
    from html import escape

    if html:
        return await _respond(send, status, REFUSED_PAGE.format(message=escape(message)).encode(),
                              [(b"content-type", b"text/html; charset=utf-8")])
    body = {"error": message, **({"token": True} if token else {})}
    await _respond(send, status, json.dumps(body).encode(), [(b"content-type", b"application/json")])


class Stopping:
    """Set when the server is asked to stop, so that open event streams end and the server need not wait for
    them (a browser keeps one open for as long as the page is shown)."""

    def __init__(self):
        self.event: asyncio.Event | None = None
        self.loop = None

    def bind_loop(self) -> asyncio.Event:
        self.loop, self.event = asyncio.get_running_loop(), asyncio.Event()
        return self.event

    def set(self) -> None:
        if self.loop is not None and self.event is not None:
            self.loop.call_soon_threadsafe(self.event.set)


def serve(app, launch: Launch, stopping: Stopping) -> None:
    """Serve until SIGINT or SIGTERM; returns once open streams are closed (after 3 s at most)."""
    import uvicorn

    class Server(uvicorn.Server):
        exit_wanted: asyncio.Event | None = None

        def handle_exit(self, sig, frame):
            stopping.set()
            super().handle_exit(sig, frame)
            if self.exit_wanted is not None and stopping.loop is not None:
                stopping.loop.call_soon_threadsafe(self.exit_wanted.set)

        async def main_loop(self) -> None:
            # uvicorn wakes ten times a second to look for a stop; an idle dashboard should cost nothing, so it
            # wakes once a second (its Date header's resolution) and at once when asked to stop.
            self.exit_wanted = asyncio.Event()
            while not await self.on_tick(0):
                try:
                    await asyncio.wait_for(self.exit_wanted.wait(), 1.0)
                except TimeoutError:
                    pass

        @contextmanager
        def capture_signals(self):
            # uvicorn re-raises the signal once it has stopped, which would end the command by SIGTERM (or a
            # KeyboardInterrupt): a stop asked for is a clean exit here.
            previous = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
            try:
                yield
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)

    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on", timeout_graceful_shutdown=3,
                            server_header=False)
    Server(config).run(sockets=[launch.sock])


def announce(launch: Launch, out=None, err=None) -> None:
    out, err = out or sys.stdout, err or sys.stderr
    warning = launch.warning()
    if warning:
        err.write(warning + "\n")
    out.write(f"{launch.tool} ui: {launch.url}\n(open it in a browser; Ctrl-C stops the server)\n")
    out.flush()
    err.flush()


def token_file_variable(tool: str) -> str:
    return f"{tool.upper()}_UI_TOKEN_FILE"


def stable_token(tool: str, environ) -> str | None:
    """The token kept in the file that TOOL_UI_TOKEN_FILE names (made there, readable by its owner only, when the
    file does not exist yet); None without that variable: a new token each launch. LaunchError when the file
    cannot be read or made, or holds no usable token."""
    name = token_file_variable(tool)
    path = environ.get(name)
    if not path:
        return None
    try:
        with open(path, encoding="ascii") as f:
            token = f.read().strip()
    except FileNotFoundError:
        token = secrets.token_urlsafe(24)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="ascii") as f:
                f.write(token + "\n")
        except OSError as e:
            raise LaunchError(f"{name}={path}: cannot create the token file ({e.strerror}); give a path in a "
                              "writable directory") from None
    except (OSError, UnicodeDecodeError) as e:
        raise LaunchError(f"{name}={path}: cannot read the token file ({getattr(e, 'strerror', None) or e}); fix "
                          "it or remove it (a new one is made)") from None
    if len(token) < 16 or not token.replace("-", "").replace("_", "").isalnum():
        raise LaunchError(f"{name}={path}: the file holds no usable token (16 or more letters, digits, - or _); "
                          "remove it and a new one is made")
    return token


def run(tool: str, host: str, port: int, make_app) -> int:
    """`TOOL ui`: bind, build the application (make_app(launch) -> (app, stopping)), print the URL, serve until
    Ctrl-C or SIGTERM. LaunchError (one line) when it cannot start: nothing is listening then."""
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as e:
        raise LaunchError(f"the dashboard needs Starlette and uvicorn ({e.name} is missing): install the `ui` extra, "
                          "pip install 'jobman-stado[ui]'") from None
    token = stable_token(tool, os.environ)
    launch = Launch(bind(host, port), host, tool, token)
    try:
        app, stopping = make_app(launch)
        announce(launch)
        serve(app, launch, stopping)
    finally:
        launch.sock.close()
    return 0
