"""Wide rows built by keyword, for the per-job paths (small values read by position are runkit.core.records')."""


class Frozen:
    """A frozen record built by keyword, for rows of many columns where most may be absent (absent ones are None):
    a subclass lists its fields in `__slots__` (a subclass of a subclass adds to them) and may write their types in
    an `if TYPE_CHECKING:` block for the type checker. Not a dataclass: `dataclasses` costs a process that loads it
    15-20 ms and 2 MiB (it imports inspect, ast, dis, ...)."""

    __slots__ = ()
    _fields: tuple = ()  # every field, the base classes' first

    def __init_subclass__(cls):
        cls._fields = cls._fields + tuple(cls.__dict__.get("__slots__", ()))

    def __init__(self, **fields):
        for name in self._fields:
            object.__setattr__(self, name, fields.get(name))

    def __setattr__(self, name, value):
        raise AttributeError(f"{type(self).__name__} is frozen")

    def __eq__(self, other):
        return type(other) is type(self) and all(getattr(self, n) == getattr(other, n) for n in self._fields)

    def __hash__(self):
        return hash(tuple(getattr(self, n) for n in self._fields))

    def __repr__(self):
        return f"{type(self).__name__}({', '.join(f'{n}={getattr(self, n)!r}' for n in self._fields)})"
