"""Command-line options declared once, as a table, and read two ways.

A submitting command starts for every job, and argparse with what it pulls in (re, gettext, locale,
shutil) costs it ~20 ms. So well-formed input is read by the small parser here, and argparse, built
from the same table, takes over for --help and for anything the small parser does not accept: every
error message still comes from argparse (or from the table's converters), in one place.
"""


class Option:
    """One option. kind: "value" (the last one given wins), "append" (repeatable: a list), "flag"
    (True when given). `convert` turns the text into the value and raises ValueError with a message fit
    for the user; `tag`, if set, makes an appended item the pair (value, tag) (several flags may share
    one dest, as --after-success / --after-failure do)."""

    __slots__ = ("flags", "dest", "kind", "convert", "default", "metavar", "help", "choices", "tag")

    def __init__(self, flags, dest: str, kind: str = "value", convert=None, default=None, metavar=None,
                 help=None, choices=None, tag=None):
        self.flags = (flags,) if isinstance(flags, str) else tuple(flags)
        self.dest, self.kind, self.convert, self.default = dest, kind, convert, default
        self.metavar, self.help, self.choices, self.tag = metavar, help, choices, tag

    def value_of(self, text: str):
        if self.choices is not None and text not in self.choices:
            raise ValueError(f"invalid choice: {text!r} (choose from {', '.join(map(repr, self.choices))})")
        return self.convert(text) if self.convert else text


class Namespace:
    def __init__(self, **values):
        self.__dict__.update(values)


def defaults(options: list[Option]) -> dict:
    values: dict = {}
    for o in options:
        if o.kind == "append":
            values.setdefault(o.dest, [])
        else:
            values[o.dest] = o.default
    return values


def fast_parse(tokens: list[str], options: list[Option], max_positionals: int) -> Namespace | None:
    """Options and up to `max_positionals` positionals -> a Namespace (positionals in `.positionals`);
    None for anything else: unknown or abbreviated flags, a missing value, a value that looks like a
    flag, a value its converter refuses, help."""
    by_flag = {flag: o for o in options for flag in o.flags}
    values = defaults(options)
    positionals = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if not token.startswith("-") or token == "-":
            positionals.append(token)
            if len(positionals) > max_positionals:
                return None
            i += 1
            continue
        flag, eq, text = token.partition("=")
        option = by_flag.get(flag)
        if option is None:
            return None
        if option.kind == "flag":
            if eq:
                return None
            values[option.dest] = True
            i += 1
            continue
        if not eq:
            i += 1
            if i >= len(tokens):
                return None
            text = tokens[i]
        if text.startswith("-"):
            return None
        try:
            value = option.value_of(text)
        except ValueError:
            return None
        if option.kind == "append":
            values[option.dest] = values[option.dest] + [(value, option.tag) if option.tag else value]
        else:
            values[option.dest] = value
        i += 1
    return Namespace(positionals=positionals, **values)


def join_negative_values(tokens: list[str], takes_value) -> list[str]:
    """`--opt -1s` -> `--opt=-1s` when `takes_value(token)` says the option takes a value and the next
    token looks like a negative number ('-' then a digit or '.'). argparse would read `-1s` as an
    unknown option and report only "expected one argument"; joined, the value reaches the option's
    converter, whose message names the real problem. Nothing after `--` is touched."""
    out, i = [], 0
    while i < len(tokens):
        token = tokens[i]
        if token == "--":
            out.extend(tokens[i:])
            break
        if (i + 1 < len(tokens) and _looks_negative(tokens[i + 1]) and token.startswith("-") and "=" not in token
                and takes_value(token)):
            out.append(f"{token}={tokens[i + 1]}")
            i += 2
            continue
        out.append(token)
        i += 1
    return out


def _looks_negative(token: str) -> bool:
    return len(token) > 1 and token[0] == "-" and (token[1].isdigit() or token[1] == ".")


def add_to_argparse(parser, options: list[Option]) -> None:
    """Declare the same options on an argparse parser (whose errors then speak for the table)."""
    seen_append = set()
    for o in options:
        kwargs = {"dest": o.dest, "help": o.help}
        if o.kind == "flag":
            parser.add_argument(*o.flags, action="store_true", **kwargs)
            continue
        if o.metavar:
            kwargs["metavar"] = o.metavar
        if o.choices is not None and o.convert is None and o.tag is None:
            kwargs["choices"] = o.choices
        elif o.convert is not None or o.tag is not None:
            kwargs["type"] = _argparse_type(o)
        if o.kind == "append":
            kwargs["action"] = "append"
            if o.dest not in seen_append:
                kwargs["default"] = []
                seen_append.add(o.dest)
        else:
            kwargs["default"] = o.default
        parser.add_argument(*o.flags, **kwargs)


def _argparse_type(option: Option):
    from .cliargs import argparse_type

    if option.tag:
        return argparse_type(lambda text: (option.value_of(text), option.tag), option.dest)
    return argparse_type(option.value_of, option.dest)


def to_namespace(parsed, options: list[Option], positional_dest: str) -> Namespace:
    """An argparse result in the shape fast_parse gives (append dests as lists, `.positionals`)."""
    values = vars(parsed)
    for o in options:
        if o.kind == "append" and values.get(o.dest) is None:
            values[o.dest] = []
    found = values.pop(positional_dest, None)
    positionals = found if isinstance(found, list) else ([] if found is None else [found])
    return Namespace(positionals=positionals, **values)
