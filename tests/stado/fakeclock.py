"""A wrong wall clock for a real program, with libfaketime (its library comes inside the `libfaketime` wheel of the
test extra, built for x86-64 Linux): the program's time.time() is off by the given offset; its monotonic clock,
the times the kernel stamps on files, and the clocks of its children (LD_PRELOAD is not in a job's environment)
stay true. Used by the soak's skewed agents and by the clock tests."""
from pathlib import Path


def faked_clock(offset: str) -> dict:
    """The environment variables that run a program with its wall clock `offset` seconds off ("+3600", "-90")."""
    import libfaketime

    library = Path(libfaketime.__file__).parent / "vendor" / "libfaketime" / "src" / "libfaketime.so.1"
    if not library.is_file():
        raise RuntimeError(f"libfaketime's library is missing ({library}): run `make install` (the test extra)")
    return {"LD_PRELOAD": str(library), "FAKETIME": offset, "DONT_FAKE_MONOTONIC": "1"}
