"""A dashboard's Starlette application: the page, its static files, the change stream and the tool's own routes.

Live updates: one watcher per server takes a fingerprint of the state (the tool's cheap query: an events counter,
a listing's versions) every `interval` seconds in a worker thread; when it changes, every open page is told
through server-sent events (`/api/events`) and fetches again what it shows (one page of a list, never the whole
list), so the cost of an update does not grow with the number of pages open or jobs stored.
"""
import asyncio
import json
import statistics
import time
from collections import deque
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

from .server import STATIC, Launch, Stopping

KEEPALIVE = 15.0  # seconds between comments on an idle stream (proxies and browsers drop silent ones)
SHARE = 0.005  # of a core, at most, that looking for changes may take: a look that takes longer waits longer


class Changes:
    """The version of what the page shows: it moves on each time the fingerprint differs from the last one. Looked
    for only while a page is open (an event stream is connected): an idle server costs nothing. Between two looks
    it waits `interval`, or longer when a look is dear (a listing of 10,000 jobs): 1/SHARE times the CPU time the
    last look took, so the watcher never takes more than SHARE of a core (a change is then seen later)."""

    def __init__(self, fingerprint, interval: float):
        self.fingerprint, self.interval = fingerprint, interval
        self.version, self.watchers, self.poked = 0, 0, False
        self.costs: deque[float] = deque(maxlen=5)  # CPU seconds of the last looks
        self.error: str | None = None
        self._last = object()
        self._moved: asyncio.Event | None = None
        self._wanted: asyncio.Event | None = None

    async def run(self, stopping: asyncio.Event) -> None:
        from starlette.concurrency import run_in_threadpool

        self._moved, self._wanted = asyncio.Event(), asyncio.Event()
        while not stopping.is_set():
            if not self.watchers:
                await _first(self._wanted.wait(), stopping.wait())
                self._wanted.clear()
                # A page that just connected is fetching what it shows: look after it, not beside it.
                await _first(stopping.wait(), timeout=self.interval)
                continue
            poked, self.poked = self.poked, False
            try:
                print_, took = await run_in_threadpool(_timed, self.fingerprint, poked)
                self.error = None
            except Exception as e:  # the page says so and keeps what it had; the next look may work
                print_, self.error, took = ("error", str(e)), str(e), 0.0
            if print_ != self._last:
                self._last = print_
                self.version += 1
                moved, self._moved = self._moved, asyncio.Event()
                moved.set()
            # A change made through the page itself (poke) is looked for at once, however dear a look is.
            # Paced by the median of the last looks: a tool's occasional dear look (stado's full listings, which keep
            # to their own budget) does not hold back the cheap ones that follow.
            self.costs.append(took)
            cost = statistics.median(self.costs)
            await _first(stopping.wait(), self._wanted.wait(), timeout=max(self.interval, cost / SHARE))
            self._wanted.clear()

    def watch(self) -> None:
        """A page opened its stream: look from now on (at once, if nobody was looking)."""
        self.watchers += 1
        if self._wanted is not None:
            self._wanted.set()

    def poke(self) -> None:
        """A page changed something (a POST went through): look again now, not after the wait, and tell the
        fingerprint (fingerprint(poked)) so that it looks at everything."""
        self.poked = True
        if self._wanted is not None:
            self._wanted.set()

    def unwatch(self) -> None:
        self.watchers -= 1

    async def wait(self, seen: int, stopping: asyncio.Event, timeout: float) -> None:
        """Until the version is no longer `seen`, the server stops, or `timeout` passes."""
        if self.version != seen or self._moved is None:
            return
        await _first(self._moved.wait(), stopping.wait(), timeout=timeout)


def _timed(function, *args):
    """(function(*args), the CPU time its thread spent on it)."""
    began = time.thread_time()
    result = function(*args)
    return result, time.thread_time() - began


async def _first(*waits, timeout: float | None = None) -> None:
    tasks = [asyncio.ensure_future(w) for w in waits]
    try:
        await asyncio.wait(tasks, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()


def event(name: str, data) -> str:
    return f"event: {name}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"


SHELL = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<link rel="stylesheet" href="/static/common.css">
{head}
</head>
<body>
<header class="top">
  <h1><a href="#/">{title}</a></h1>
  <nav id="tabs">{tabs}</nav>
  <span id="live" class="live bad">connecting…</span>
</header>
<main id="main"></main>
<div id="notices"></div>
</body>
</html>
"""


def shell(title: str, scripts: list[str], styles: list[str], tabs: list[tuple[str, str, str]]) -> str:
    """The page every route of the tool serves (its code draws the rest): the tool's scripts (after common.js)
    and styles, and its tabs as (hash, name, label)."""
    from html import escape

    head = [f'<link rel="stylesheet" href="{escape(href)}">' for href in styles]
    head += [f'<script src="{escape(src)}" defer></script>' for src in ["/static/common.js", *scripts]]
    links = "".join(f'<a href="{escape(href)}" data-tab="{escape(name)}">{escape(label)}</a>'
                    for href, name, label in tabs)
    return SHELL.format(title=escape(title), head="\n".join(head), tabs=links)


def build(launch: Launch, *, tool_routes: list, page_html: str, app_static: Path, fingerprint, interval: float,
          errors: dict):
    """The application. page_html: shell()'s page. fingerprint(poked) -> a value that differs whenever what a page
    shows may have (poked: a page just changed something, so look at everything). errors: exception class -> HTTP status, for the tool's own errors
    (and bad requests), whose message is shown to the user as it is (one line that names what to do)."""
    from starlette.applications import Starlette
    from starlette.responses import HTMLResponse, JSONResponse, Response
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles

    from .server import Guard

    changes = Changes(fingerprint, interval)
    stopping = Stopping()

    @asynccontextmanager
    async def lifespan(app):
        stop = stopping.bind_loop()
        watcher = asyncio.create_task(changes.run(stop))
        try:
            yield
        finally:
            stop.set()
            watcher.cancel()
            with suppress(asyncio.CancelledError):
                await watcher

    async def page(request):
        return HTMLResponse(page_html)

    events = _events(changes, stopping)

    async def tool_error(request, exc):
        status = next(errors[cls] for cls in type(exc).__mro__ if cls in errors)
        return JSONResponse({"error": str(exc)}, status_code=status)

    async def no_icon(request):
        return Response(status_code=204)

    async def ping(request):  # the page asks, after its stream was refused, whether its token still holds
        return JSONResponse({"ok": True})

    routes = [Route("/", page), Route("/favicon.ico", no_icon), Route("/job/{rest:path}", page), Route("/api/events", events),
              Route("/api/ping", ping), *tool_routes,
              Mount("/static", StaticFiles(directory=STATIC)), Mount("/app", StaticFiles(directory=app_static))]
    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers={cls: tool_error for cls in errors})
    app.state.stopping = stopping
    app.state.changes = changes
    return Guard(_poking(app, changes), launch), stopping


def _poking(app, changes: Changes):
    """ASGI: after each state-changing request has been answered, the watcher looks for its change at once."""
    async def poking(scope, receive, send):
        await app(scope, receive, send)
        if scope["type"] == "http" and scope["method"] == "POST":
            changes.poke()

    return poking


def _events(changes: "Changes", stopping: Stopping):
    """The /api/events route: a server-sent event each time the fingerprint moves, a keepalive between."""
    from starlette.responses import StreamingResponse

    async def events(request):
        stop = stopping.event

        async def stream():
            # The page fetches what it shows on the first event: a version taken while nobody watched may be old.
            seen = -1
            changes.watch()
            try:
                while not stop.is_set():
                    if changes.version != seen:
                        seen = changes.version
                        yield event("change", {"version": seen, "error": changes.error})
                    else:
                        yield ": keepalive\n\n"
                    await changes.wait(seen, stop, KEEPALIVE)
            finally:
                changes.unwatch()

        return StreamingResponse(stream(), media_type="text/event-stream", headers={"x-accel-buffering": "no"})

    return events


async def body_of(request) -> dict:
    """The JSON object a POST carries ({} for none); a body that is not one is the caller's error (ValueError)."""
    raw = await request.body()
    if not raw:
        return {}
    data = json.loads(raw)
    if not isinstance(data, dict):
        raise ValueError("the request body is not a JSON object")
    return data


def whole(text: str | None, default: int, what: str) -> int:
    """A whole number from a query parameter (absent: `default`); ValueError (a 400) otherwise."""
    if text in (None, ""):
        return default
    if not text.isdigit():
        raise ValueError(f"{what} must be a whole number, not {text!r}")
    return int(text)


def selection(body: dict, actions: tuple) -> "tuple[str, list[str]]":
    """(action, the jobs selected) of an action request; ValueError (the user's one line, a 400) otherwise."""
    action, selected = body.get("action"), body.get("jobs")
    if action not in actions:
        raise ValueError(f"unknown action {action!r}: use one of {', '.join(actions)}")
    if not isinstance(selected, list) or not selected or not all(isinstance(j, str) and j for j in selected):
        raise ValueError("select at least one job")
    return str(action), selected


def download(data: bytes, filename: str):
    """Bytes as a file for the browser to save (a raw log, an artifact), never shown as a page."""
    from urllib.parse import quote

    from starlette.responses import Response

    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in filename)
    return Response(data, media_type="application/octet-stream",
                    headers={"content-disposition": f"attachment; filename=\"{safe}\"; filename*=UTF-8''{quote(safe)}"})


def stream_response(generator):
    from starlette.responses import StreamingResponse

    return StreamingResponse(generator, media_type="text/event-stream", headers={"x-accel-buffering": "no"})


async def tail(since, start, stop: asyncio.Event, every: float):
    """Server-sent events of a job's output: `output` {attempt, text} for each piece, then `end` once nothing more
    will come. since(position) -> {"pieces": [(attempt, bytes)], "after": position, "done": bool}, called in a
    worker thread every `every` seconds from `start`; each attempt's bytes are decoded as UTF-8 across pieces (a
    character cut between two reads is whole in the page)."""
    from codecs import getincrementaldecoder

    from starlette.concurrency import run_in_threadpool

    got, decoders = await run_in_threadpool(since, start), dict[int, Any]()
    while True:
        for attempt, data in got["pieces"]:
            decoder = decoders.setdefault(attempt, getincrementaldecoder("utf-8")("replace"))
            yield event("output", {"attempt": attempt, "text": decoder.decode(data)})
        if got["done"]:
            yield event("end", {})
            return
        with suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), every)
            return
        got = await run_in_threadpool(since, got["after"])
