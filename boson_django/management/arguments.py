"""Argument types shared by the ``boson_*`` commands: a value out of range stops the
command with an error naming the option (exit status 2, as argparse does for any bad
option), before it touches the store -- not a traceback from deep inside it."""

from __future__ import annotations

import argparse
from collections.abc import Callable


def whole(minimum: int) -> Callable[[str], int]:
    """A whole number >= ``minimum``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a whole number >= {minimum}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be a whole number >= {minimum}, got {text!r}")
        return value

    return parse


positive = whole(1)


def port(text: str) -> int:
    """A TCP port: past 65535 the bind raised OverflowError, a traceback naming no option."""
    value = positive(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"must be a port number from 1 to 65535, got {text!r}")
    return value


def seconds(text: str) -> float:
    """A finite number of seconds >= 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds >= 0, got {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds >= 0, got {text!r}")
    return value


def queue_name(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("a queue name cannot be empty")
    return text
