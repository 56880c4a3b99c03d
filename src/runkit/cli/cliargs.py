"""What both command lines share around argparse, once: a parser whose every error is one line raised as
the tool's own bad-input exception, argparse types made from plain converters, and those converters.

Cheap to import (argparse is imported only when a parser is built or a value refused), so the start-up
path of a submission, which reads its options with runkit.cli.fastargs, may use the converters.
"""
import math

_CLASSES: dict = {}


def whole(text: str) -> int:
    """A whole number (any sign)."""
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a whole number") from None


def non_negative(text: str) -> float:
    """A finite number >= 0."""
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{text!r} must be a finite number >= 0")
    return value


def text_problem(value: str, *, empty_ok: bool = False, any_bytes: bool = False) -> str | None:
    """What is wrong with a text argument, said to follow its flag (`--name is empty: ...`), or None. Empty means
    nothing where a word is expected; bytes that are not UTF-8 arrive as lone surrogates, which no stored text
    can hold (`any_bytes`: a local file's name, which may hold any)."""
    if not value and not empty_ok:
        return "is empty, which means nothing here: give a value"
    if not any_bytes:
        try:
            value.encode()
        except UnicodeEncodeError:
            shown = value.encode(errors="surrogateescape")
            return f"{shown!r} is not valid UTF-8: names, commands and other text are kept as UTF-8"
    return None


def argparse_type(convert, name: str | None = None):
    """An argparse `type` from a converter that raises ValueError with a message fit for the user (argparse
    would otherwise say only "invalid <name> value")."""
    def parse(text: str):
        try:
            return convert(text)
        except ValueError as e:
            import argparse

            raise argparse.ArgumentTypeError(str(e)) from None

    parse.__name__ = name or getattr(convert, "__name__", None) or "value"  # argparse names the type in some messages
    return parse


def parser_class(bad_input: type, error_format: str, join_negatives: bool = False):
    """An argparse.ArgumentParser subclass (one per tool and format) whose errors raise
    `bad_input(error_format.format(prog=..., message=...))` instead of printing usage and exiting 2.
    With join_negatives, `--opt -1s` reaches the option's converter (runkit.cli.fastargs.join_negative_values),
    whose message names the real problem, rather than argparse's "expected one argument"."""
    key = (bad_input, error_format, join_negatives)
    if key not in _CLASSES:
        _CLASSES[key] = _make_class(bad_input, error_format, join_negatives)
    return _CLASSES[key]


def _make_class(bad_input: type, error_format: str, join_negatives: bool):
    import argparse
    import sys

    class Parser(argparse.ArgumentParser):
        def parse_known_args(self, args=None, namespace=None):
            args = sys.argv[1:] if args is None else list(args)
            if join_negatives:
                from .fastargs import join_negative_values

                args = join_negative_values(args, self._takes_value)
            return super().parse_known_args(args, namespace)

        def _takes_value(self, flag: str) -> bool:
            action = self._option_string_actions.get(flag)
            if action is None and flag.startswith("--") and self.allow_abbrev:
                found = {a for s, a in self._option_string_actions.items() if s.startswith(flag)}
                action = found.pop() if len(found) == 1 else None
            return action is not None and action.nargs in (None, 1, "?")

        def error(self, message):  # one line, not usage + message
            raise bad_input(error_format.format(prog=self.prog, message=_say_flag_once(message)))

    return Parser


def _say_flag_once(message: str) -> str:
    """argparse's "argument --delay: --delay: ..." (a converter's message that names its flag) says it once."""
    if message.startswith("argument "):
        names, sep, rest = message[len("argument "):].partition(": ")
        if sep and any(rest.startswith((name + ":", name + " ")) for name in names.split("/")):
            return rest
    return message
