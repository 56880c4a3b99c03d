"""What stado's command families share: the store opened from STADO_CONFIG, text and JSON out, argument types."""
import sys

from runkit.cli.cliargs import argparse_type, non_negative, whole

PROG = "stado"
JSON_HELP = "print JSON instead of text (for scripts)"


def json_flag(parser, help: str = JSON_HELP):
    """--json, which every reading command takes. Returns the parser."""
    parser.add_argument("--json", action="store_true", help=help)
    return parser


def open_store():
    from ..objectstore.connect import store_from_environment

    return store_from_environment()


def out(text: str) -> None:
    """Text for people: each line through runkit.core.printable, so other people's text that a view did not escape
    itself still never reaches the terminal as control (escaping is idempotent: what a view escaped stays)."""
    from runkit.core.printable import printable

    lines = text[:-1] if text.endswith("\n") else text
    sys.stdout.write("\n".join(printable(line) for line in lines.split("\n")) + "\n")


def print_json(data) -> None:
    """JSON for scripts, as stored (ASCII: json's escapes keep every character)."""
    import json

    sys.stdout.write(json.dumps(data, indent=None, sort_keys=True) + "\n")


def positive(text: str) -> int:
    number = whole(text)
    if number < 1:
        raise ValueError(f"{text} is not an attempt number: attempts count from 1")
    return number


def duration(text: str) -> float:
    from runkit.core.durations import parse_duration

    return parse_duration(text)


def port(text: str) -> int:
    number = whole(text)
    if not 0 <= number <= 65535:
        raise ValueError(f"{text} is not a port: give 1-65535, or 0 for a free one")
    return number


seconds = argparse_type(non_negative)  # an argparse type: a number of seconds, 0 or more
