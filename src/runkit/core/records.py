"""Small values read by position or name, for the per-job paths (the submitting CLIs and the supervisor; wide rows
built by keyword are runkit.core.frozen's; off those paths a value object is a frozen dataclass).

`record()` is a named tuple without importing `collections`: `record("Version", "etag generation", defaults=(None,))` makes the
same kind of class as collections.namedtuple (a tuple subclass with a property per field, keyword arguments,
defaults for the last fields, `_replace`, `_asdict`, `_fields`, a readable repr).

collections.namedtuple costs a command 2.3 ms (importing `collections`, then compiling a `__new__` for each class
with exec); this costs 0.5 ms for the same six classes: about a tenth of `stado submit`. Fields are read through the
C accessor namedtuple itself uses. The type checker reads each call as a namedtuple's.
"""
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections import namedtuple as record
else:
    import sys

    try:
        from _collections import _tuplegetter  # CPython's accessor, the one namedtuple uses
    except ImportError:  # another interpreter: a property over itemgetter does the same, a little slower
        from operator import itemgetter

        def _tuplegetter(index, doc):
            return property(itemgetter(index), doc=doc)

    def record(typename: str, field_names: str, *, defaults: tuple = ()) -> type:
        fields = tuple(field_names.replace(",", " ").split())
        count = len(fields)
        if len(defaults) > count:
            raise TypeError(f"{typename}: more defaults than fields")
        defaulted = dict(zip(fields[count - len(defaults):], defaults))

        def __new__(cls, *args, **kwargs):
            if len(args) > count:
                raise TypeError(f"{typename}() takes {count} positional arguments but {len(args)} were given")
            if kwargs or len(args) < count:
                values = list(args)
                for name in fields[len(args):]:
                    if name in kwargs:
                        values.append(kwargs.pop(name))
                    elif name in defaulted:
                        values.append(defaulted[name])
                    else:
                        raise TypeError(f"{typename}() missing required argument: {name!r}")
                for name in kwargs:
                    raise TypeError(f"{typename}() got multiple values for argument {name!r}" if name in fields
                                    else f"{typename}() got an unexpected keyword argument {name!r}")
                args = tuple(values)
            return tuple.__new__(cls, args)

        def __repr__(self) -> str:
            return f"{type(self).__name__}({', '.join(f'{n}={v!r}' for n, v in zip(fields, self))})"

        def _replace(self, **changes):
            new = tuple.__new__(type(self), [changes.pop(name, value) for name, value in zip(fields, self)])
            if changes:
                raise ValueError(f"got unexpected field names: {list(changes)!r}")
            return new

        def _asdict(self) -> dict:
            return dict(zip(fields, self))

        def __getnewargs__(self) -> tuple:
            return tuple(self)

        namespace = {"__module__": sys._getframe(1).f_globals.get("__name__", "__main__"),  # as namedtuple: pickling
                     "__doc__": f"{typename}({', '.join(fields)})", "__slots__": (), "_fields": fields,
                     "_field_defaults": defaulted, "__match_args__": fields, "__new__": __new__,
                     "__repr__": __repr__, "_replace": _replace, "_asdict": _asdict, "__getnewargs__": __getnewargs__}
        for index, name in enumerate(fields):
            namespace[name] = _tuplegetter(index, f"Alias for field number {index}")
        return type(typename, (tuple,), namespace)

