"""Which stado code made each request: loaded at start-up by the `stado` processes bench/stado_requests.py runs
(it puts this directory on their PYTHONPATH and sets STADO_WIRE_TRACE).

The wire (bench/s3wire.py) says what was sent; this says why. Each call of a cloud store's verbs is appended,
before it is sent, to STADO_WIRE_TRACE.<pid> (one JSON line: the verb, the key or prefix, and the stado
functions on the stack, innermost first), and the bench pairs the calls with the requests it counted. Nothing
else changes: every call goes through as it came, and no process without STADO_WIRE_TRACE is touched (an
agent gives its jobs only the runtime variables, so this stops at the agent).
"""
import os


def _install(path: str) -> None:
    import json
    import sys
    import threading

    from stado.objectstore import cloud

    fd = os.open(f"{path}.{os.getpid()}", os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
    lock = threading.Lock()

    def stack() -> list[str]:
        frame, out = sys._getframe(3), []
        while frame is not None and len(out) < 10:
            name = frame.f_code.co_filename
            at = name.rfind("/src/stado/")
            if at >= 0 and "/objectstore/" not in name:
                out.append(f"{name[at + len('/src/stado/'):]}:{frame.f_code.co_name}")
            frame = frame.f_back
        return out

    def record(verb: str, key: str) -> None:
        line = json.dumps({"verb": verb, "key": key, "stack": stack(), "thread": threading.current_thread().name})
        with lock:
            os.write(fd, line.encode() + b"\n")

    def traced(verb: str):
        inner = getattr(cloud.CloudStore, verb)

        def call(self, key, *args, **kwargs):
            record(verb, key)
            return inner(self, key, *args, **kwargs)

        return call

    def traced_list(self, prefix):
        record("list", prefix)  # a generator: this runs when its consumer asks for the first entry
        yield from inner_list(self, prefix)

    inner_list = cloud.CloudStore.list
    for verb in ("get", "head", "get_range", "put_if_absent", "put_if_match", "put", "put_chunks", "delete",
                 "delete_if_match", "list_page"):
        setattr(cloud.CloudStore, verb, traced(verb))
    cloud.CloudStore.list = traced_list


if os.environ.get("STADO_WIRE_TRACE"):
    _install(os.environ["STADO_WIRE_TRACE"])
