"""Argument types shared by the ``boson_*`` commands: a value out of range stops the
command with an error naming the option (exit status 2, as argparse does for any bad
option), before it touches the store -- not a traceback from deep inside it."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from boson_django import validation
from boson_django.errors import InvalidEnvelope


def whole(minimum: int) -> Callable[[str], int]:
    """A whole number >= ``minimum``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a whole number >= {minimum}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be a whole number >= {minimum}, got {text!r}")
        if value > validation.MAX_COUNT:  # past the store's integers: a DataError traceback
            raise argparse.ArgumentTypeError(f"must be a whole number <= {validation.MAX_COUNT}, got {text!r}")
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
    """A queue name the store takes: a name past 100 characters, or with a control
    character, ended in a traceback from the worker's first admission."""
    if not text.strip():
        raise argparse.ArgumentTypeError("a queue name cannot be empty")
    return _name(text, validation.MAX_NAME)


def worker_id(text: str) -> str:
    """A holder name the store takes (at most 255 printable characters): a longer one, a
    blank one or one with a control character ended in a traceback from the worker's
    first duty claim. Empty, as before, leaves the default."""
    return text and _name(text, 255)


def _name(text: str, max_len: int) -> str:
    try:
        return validation.name(text, "name", max_len=max_len)
    except InvalidEnvelope as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix(f"{exc.field}: ")) from None
