"""Durable file writes through one helper: temp file, fsync, rename, fsync the directory."""
import os


def write_atomic(path: str, data: bytes, mode: int = 0o600) -> None:
    """Replace path with data so that a crash leaves either the old or the new content."""
    directory = os.path.dirname(os.path.abspath(path))
    tmp, _ = write_temp(directory, data, mode=mode)
    try:
        os.rename(tmp, path)
    except BaseException:
        unlink_quietly(tmp)
        raise
    fsync_dir(directory)


def fsync_dir(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def unlink_quietly(path: str) -> None:
    """Remove a file if it can be removed (a temporary file on an error path: the error that matters is raised)."""
    try:
        os.unlink(path)
    except OSError:
        pass


def write_temp(directory: str, data, *, mode: int = 0o600,
               mtime_ns: int | None = None) -> tuple[str, os.stat_result]:
    """Write data (bytes, or an iterable of bytes written as they come) to a new, uniquely named file in
    directory and fsync it; return its path and stat.

    For callers that publish the file themselves (os.rename, then fsync_dir) because they keep
    temporary files apart from the published tree, or need the file's identity before it is visible.
    The name is unique per call, so threads and processes never share a temporary file. mtime_ns, if
    given, is set before the fsync; the returned stat shows what the filesystem kept.
    """
    path = os.path.join(directory, f".tmp.{os.getpid()}.{os.urandom(8).hex()}")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
    try:
        for chunk in (data,) if isinstance(data, (bytes, bytearray, memoryview)) else data:
            view = memoryview(chunk)
            while view:
                view = view[os.write(fd, view):]
        if mtime_ns is not None:
            os.utime(fd, ns=(mtime_ns, mtime_ns))
        os.fsync(fd)
        stat = os.fstat(fd)
    except BaseException:
        os.close(fd)
        unlink_quietly(path)
        raise
    os.close(fd)
    return path, stat
