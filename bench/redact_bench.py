"""Redaction throughput: how fast stado's output uploader can redact a job's output on one core.

    .venv/bin/python bench/redact_bench.py [--mib 32] [--repeat 3]

Each corpus (a training log, a build log, base64 blobs, a log dense with credential-looking words) is fed
to runkit.core.redact.StreamRedactor in 4 MiB pieces, as the uploader reads them, with two agent secrets. The
peer in the same run is the reference method: every credential shape applied to the whole text, which is
what StreamRedactor did before the finders (the fast path must, and is tested to, give the same text).
Figures are MB per second of this thread's CPU time (10^6 bytes; time.thread_time, so other load on the
machine does not count), best of --repeat; the target is 50 MB/s on one core.
"""
import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from runkit.core import redact
from runkit.core.redact import StreamRedactor

SECRETS = ["the-agent-secret-42", "s3cr3t-proxy-pass"]
PIECE = 4 * 1024 * 1024


def corpus(kind: str, size: int) -> bytes:
    rng = random.Random(kind)
    lines, total = [], 0
    while total < size:
        if kind == "training log":
            i = len(lines)
            line = (f"epoch {i // 1000} step {i} loss 0.{rng.randint(0, 9999):04d} tokens {i * 512} lr=3e-4 "
                    f"grad_norm={rng.random():.3f} see https://wandb.example.com/run/{i}\n")
        elif kind == "build log":
            line = (f"   Compiling crate-{rng.randint(0, 999)} v0.{rng.randint(0, 20)}.3 (/home/ci/src/crates/"
                    f"module_{rng.randint(0, 99)}/lib.rs)\nwarning: unused variable `key_{rng.randint(0, 9)}` at "
                    f"src/main.rs:{rng.randint(1, 999)}:5\n")
        elif kind == "base64 blobs":
            line = "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
                           for _ in range(76)) + "\n"
        else:  # credential-looking words everywhere, a few real credentials
            line = (f"token count {rng.randint(0, 99)} secret sauce password policy api_key rotation bearer of news "
                    f"{'API_TOKEN=abcdef' + str(rng.randint(100000, 999999)) if rng.random() < 0.01 else 'ok'}\n")
        lines.append(line)
        total += len(line)
    return "".join(lines).encode()[:size]


def stream_mb_s(data: bytes, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        began = time.thread_time()
        redactor = StreamRedactor(SECRETS)
        for i in range(0, len(data), PIECE):
            redactor.feed(data[i:i + PIECE])
        redactor.feed(b"", final=True)
        best = min(best, time.thread_time() - began)
    return len(data) / best / 1e6


def reference_mb_s(data: bytes, repeat: int) -> float:
    text = data[:PIECE].decode("utf-8", "surrogateescape")  # one piece: the reference is slow
    best = float("inf")
    for _ in range(repeat):
        began = time.thread_time()
        for value in SECRETS:
            text.replace(value, redact.REDACTED)
        redact._redact_shapes(text)
        best = min(best, time.thread_time() - began)
    return PIECE / best / 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print("| corpus | StreamRedactor, MB/s | reference (every shape over the whole text), MB/s | ratio |")
    print("| --- | --- | --- | --- |")
    for kind in ("training log", "build log", "base64 blobs", "credential words"):
        data = corpus(kind, args.mib << 20)
        fast, slow = stream_mb_s(data, args.repeat), reference_mb_s(data, args.repeat)
        print(f"| {kind} | {fast:.0f} | {slow:.1f} | {fast / slow:.0f}x |")


if __name__ == "__main__":
    main()
