"""Real filesystems for the storage-fault tests: a small tmpfs that can be filled to the last byte, and a
read-only view of a directory. Mounting needs root (or passwordless sudo); without it these tests fail,
naming what they need, rather than skip."""
import contextlib
import os
import shutil
import subprocess

import pytest


def _mount_command() -> list[str]:
    if os.geteuid() == 0:
        return []
    if shutil.which("sudo") and subprocess.run(["sudo", "-n", "true"], capture_output=True).returncode == 0:
        return ["sudo", "-n"]
    pytest.fail("this test mounts a real filesystem (a small tmpfs, a read-only bind mount): run the suite as "
                "root or with passwordless sudo")


def _run(*argv: str) -> None:
    subprocess.run([*_mount_command(), *argv], check=True, capture_output=True)


@contextlib.contextmanager
def small_tmpfs(path, size: str):
    """A tmpfs of `size` (e.g. "16m") mounted at `path`, owned by the current user."""
    os.makedirs(path, exist_ok=True)
    _run("mount", "-t", "tmpfs", "-o", f"size={size},mode=0700,uid={os.getuid()},gid={os.getgid()}", "tmpfs",
         str(path))
    try:
        yield path
    finally:
        _run("umount", "-l", str(path))


@contextlib.contextmanager
def read_only_view(source, path):
    """`source` seen read-only at `path` (a bind mount, remounted read-only): writes fail with EROFS, even
    for root."""
    os.makedirs(path, exist_ok=True)
    _run("mount", "--bind", str(source), str(path))
    try:
        _run("mount", "-o", "remount,bind,ro", str(path))
        yield path
    finally:
        _run("umount", "-l", str(path))


def fill(path, chunk: int = 1 << 20) -> int:
    """Write a file at `path` until the filesystem is full to the last byte. Returns the bytes written."""
    written = 0
    with open(path, "wb", buffering=0) as f:
        size = chunk
        while size >= 1:
            try:
                written += f.write(b"\0" * size)
            except OSError:
                size //= 16 if size > 16 else 2
    return written
