"""Input checks shared by every public entry point. Each error names its field."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from boson_django import conf
from boson_django.errors import InvalidEnvelope, UnsupportedType

PRIORITY_MIN, PRIORITY_MAX = -100, 100
MAX_NAME = 100
MAX_KEY = 255
#: The longest name a schedule row can hold (``boson_schedule.name``).
MAX_SCHEDULE_NAME = 200
#: The longest cron expression a schedule row can hold (its ``cron`` column).
MAX_CRON = 120
#: The longest task path a job or schedule row can hold (their ``task`` columns).
MAX_TASK = 255
#: The job table's id column.
MAX_ID = 64
#: Durations (fields named ``*_ms``) stay under 100 years, so store time + duration is a datetime.
MAX_MS = 100 * 365 * 86_400_000
#: Counts fit the store's 32-bit integer columns.
MAX_COUNT = 2**31 - 1
#: A TaskConfig's ``uniqueness``: whether jobs of the task keep the unique key their call gives.
UNIQUENESS = ("off", "arguments")
#: One encoder for every call: ``json.dumps`` with options builds a new one each time.
#: ``ensure_ascii`` (the default) keeps the text ASCII, so its length is its size in bytes.
_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=False)
#: The text of an empty list, tuple or dict (most envelopes' kwargs and meta): nothing to walk.
_EMPTY: dict[type, str] = {list: "[]", tuple: "[]", dict: "{}"}
#: JSON nesting depth accepted: deeper values would overflow Python's recursion limit
#: when a worker decodes them (and when they are checked here).
MAX_JSON_DEPTH = 200


def name(value: Any, field: str, *, index: int | None = None, max_len: int = MAX_NAME, key: bool = False) -> str:
    """A name (a queue, a task, a rate class, an id): printable text. A ``key`` (a unique
    key, a fingerprint) may hold any text the store can, control characters included:
    it is often built from the job's own data."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidEnvelope(field, f"must be a non-empty string, got {value!r}", index=index)
    if len(value) > max_len:
        raise InvalidEnvelope(field, f"must be at most {max_len} characters", index=index)
    _storable(value, field, index)
    if not key and (control := _CONTROL.search(value)):
        # A newline or an escape sequence in a name is a mistake, and it would reach an
        # operator's terminal through boson_status and the logs.
        raise InvalidEnvelope(field, f"contains a control character ({control.group()!r}); a name is printable text",
                              index=index)
    return value


#: C0 and C1 control characters (NUL is refused as unstorable first).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def _storable(value: str, field: str, index: int | None) -> None:
    """Refuse text one vendor cannot store (PostgreSQL: NUL; both: lone surrogates)."""
    reason = _unstorable(value)
    if reason is not None:
        raise InvalidEnvelope(field, reason, index=index)


def _unstorable(value: str) -> str | None:
    """Why one vendor cannot store ``value`` (PostgreSQL: a NUL; both: a lone surrogate), or None."""
    if "\x00" in value:
        return "contains a NUL character (\\x00), which the store cannot hold"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return f"is not valid Unicode text: {value!r:.60}"
    return None


def storable_text(value: str) -> str:
    """Free text (errors, log lines) made storable on every vendor, never refused."""
    return value.replace("\x00", "\\x00").encode("utf-8", "backslashreplace").decode("utf-8")


#: Longest progress message (characters): a status line, rewritten at every step of a job
#: and read with its page. A longer one is refused, as a checkpoint or output over
#: ``MAX_RESULT_BYTES`` is, not clipped: the handler's own text, wrong at its source.
MAX_PROGRESS_MESSAGE = 1_000


def progress_message(value: Any) -> str:
    """``value`` if it is text the store can hold, of at most :data:`MAX_PROGRESS_MESSAGE`
    characters; anything else is refused naming ``message``."""
    if not isinstance(value, str):
        raise InvalidEnvelope("message", f"must be a string, got {type(value).__name__}")
    if len(value) > MAX_PROGRESS_MESSAGE:
        raise InvalidEnvelope("message", f"is {len(value):,} characters, over the {MAX_PROGRESS_MESSAGE:,} a progress "
                                         "message may hold (put more in context.output())")
    _storable(value, "message", None)
    return value


#: Longest error stored with an attempt (its message line and traceback): an exception's
#: message can be any size (a whole response body, say), stored again with every retry.
MAX_ERROR_CHARS = 64_000


def clipped(text: str, limit: int) -> str:
    """``text`` within ``limit`` characters: its start and its end, with how much was left
    out between them. A traceback keeps its header (the exception's class and message)
    and its innermost frames and last line."""
    if len(text) <= limit:
        return text
    head = limit // 4
    tail = limit - head - 64  # the marker is shorter than 64 characters
    return f"{text[:head]}\n[... {len(text) - head - tail} characters left out ...]\n{text[-tail:]}"


def job_id(value: Any, *, index: int | None = None) -> str:
    """A job id as enqueue accepts one (and so as a stored job can have): a name of at
    most ``MAX_ID`` characters."""
    return name(value, "id", index=index, max_len=MAX_ID)


def optional_name(value: Any, field: str, *, index: int | None = None, max_len: int = MAX_NAME) -> str | None:
    return None if value is None else name(value, field, index=index, max_len=max_len)


def whole(
    value: Any, field: str, *, minimum: int = 0, maximum: int | None = None, index: int | None = None
) -> int:
    """An integer >= minimum (floats with no fraction are accepted; bools are not).

    ``maximum`` defaults to :data:`MAX_MS` for durations (``*_ms`` fields), else :data:`MAX_COUNT`.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidEnvelope(field, f"must be a whole number, got {value!r}", index=index)
    if isinstance(value, float) and (not math.isfinite(value) or not value.is_integer()):
        raise InvalidEnvelope(field, f"must be a finite whole number, got {value!r}", index=index)
    if value < minimum:
        raise InvalidEnvelope(field, f"must be >= {minimum}, got {value!r}", index=index)
    top = maximum if maximum is not None else (MAX_MS if field.endswith("_ms") else MAX_COUNT)
    if value > top:
        raise InvalidEnvelope(field, f"must be <= {top}, got {value!r:.40}", index=index)
    return int(value)


def optional_whole(value: Any, field: str, *, minimum: int = 0, index: int | None = None) -> int | None:
    return None if value is None else whole(value, field, minimum=minimum, index=index)


def amount(value: Any, field: str, *, index: int | None = None) -> float:
    """A finite number >= 0 (weights)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidEnvelope(field, f"must be a number, got {value!r}", index=index)
    try:
        number = float(value)
    except OverflowError:
        raise InvalidEnvelope(field, f"is out of range: {value!r:.40}", index=index) from None
    if not math.isfinite(number) or number < 0:
        raise InvalidEnvelope(field, f"must be a finite number >= 0, got {value!r}", index=index)
    return number


def delay(value: Any, field: str = "delay_ms", *, required_positive: bool = False) -> int | None:
    if value is None:
        if required_positive:
            raise InvalidEnvelope(field, "is required (> 0)")
        return None
    ms = amount(value, field)
    if ms > MAX_MS:
        raise InvalidEnvelope(field, f"must be <= {MAX_MS}, got {value!r}")
    if required_positive and ms <= 0:
        raise InvalidEnvelope(field, f"must be > 0, got {value!r}")
    return int(math.ceil(ms))


def priority(value: Any, *, index: int | None = None) -> int:
    number = whole(value, "priority", minimum=PRIORITY_MIN, index=index)
    if number > PRIORITY_MAX:
        raise InvalidEnvelope(
            "priority", f"must be between {PRIORITY_MIN} and {PRIORITY_MAX}, got {value!r}", index=index
        )
    return number


def one_of(value: Any, allowed: Iterable[str], field: str, *, index: int | None = None) -> str:
    """``value`` if it is one of ``allowed``; a typo would otherwise match nothing, silently."""
    allowed = tuple(allowed)
    if value not in allowed:
        raise InvalidEnvelope(field, f"must be one of {', '.join(allowed)}, got {value!r}", index=index)
    return value


def aware(value: Any, field: str, *, index: int | None = None) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise InvalidEnvelope(field, f"must be an aware datetime, got {value!r}", index=index)
    return value


def json_text(value: Any, field: str, *, index: int | None = None) -> str:
    """The canonical JSON of ``value`` (ASCII); anything JSON cannot hold is refused."""
    if not value and type(value) in _EMPTY:
        return _EMPTY[type(value)]
    try:
        _check_json(value)
    except _Refused as refused:
        raise refused.error(field, index) from None
    try:
        return _ENCODER.encode(value)
    except (TypeError, ValueError) as exc:
        raise InvalidEnvelope(field, f"is not JSON: {exc}", index=index) from None


def stored_json(value: Any, field: str) -> str:
    """The JSON text of what a handler stores (a result, a checkpoint, an output), within
    ``MAX_RESULT_BYTES``: one runaway handler must not bloat every row it is read with."""
    text = json_text(value, field)
    limit = conf.get().MAX_RESULT_BYTES
    if len(text) > limit:  # ASCII JSON: characters are bytes
        raise InvalidEnvelope(field, f"is {len(text)} bytes of JSON, over MAX_RESULT_BYTES={limit}")
    return text


class _Refused(Exception):
    """A JSON value refused: why, and the path to the refused part, innermost first (each
    level of :func:`_check_json` adds its step as the error passes through it)."""

    def __init__(self, reason: str, error_class: type[InvalidEnvelope] = InvalidEnvelope) -> None:
        self.reason = reason
        self.error_class = error_class
        self.steps: list[str] = []

    def error(self, field: str, index: int | None) -> InvalidEnvelope:
        at = "".join(reversed(self.steps))
        if len(at) > 100:  # a value nested 200 levels deep
            at = f"{at[:60]}...{at[-30:]}"
        return self.error_class(field, self.reason, index=index, at=at)


def _check_json(value: Any, depth: int = 0) -> None:
    """Refuse what json.dumps would silently change (tuples keep, non-str keys do not),
    text the store cannot hold, and nesting deeper than ``MAX_JSON_DEPTH``: raises
    :class:`_Refused` with the path to the refused part (built only then)."""
    if value is None or isinstance(value, (bool, int)):
        return
    if isinstance(value, str):
        reason = _unstorable(value)
        if reason is not None:
            raise _Refused(reason)
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _Refused(f"is not JSON: {value!r} is not a finite number")
        return
    if isinstance(value, (list, tuple, dict)) and depth >= MAX_JSON_DEPTH:
        raise _Refused(f"is nested deeper than {MAX_JSON_DEPTH} levels")
    if isinstance(value, (list, tuple)):
        item = None
        try:
            for item in value:
                _check_json(item, depth + 1)
        except _Refused as refused:
            # The first item that is the refused one: an equal item before it was refused first.
            refused.steps.append(f"[{next(i for i, each in enumerate(value) if each is item)}]")
            raise
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise _Refused(f"is not JSON: key {key!r:.60} is not a string")
            reason = _unstorable(key)
            if reason is not None:
                raise _Refused(f"key {key!r:.60} {reason}")
            try:
                _check_json(item, depth + 1)
            except _Refused as refused:
                refused.steps.append(f"[{key!r:.60}]")
                raise
        return
    raise _Refused(f"is not JSON: {type(value).__name__} {value!r:.60}", UnsupportedType)


#: Each policy field's check, for an envelope's own value and for the resolved one alike.
POLICY_CHECKS: dict[str, Callable[[Any, int], Any]] = {
    "queue": lambda v, i: name(v, "queue", index=i),
    "priority": lambda v, i: priority(v, index=i),
    "weight": lambda v, i: amount(v, "weight", index=i),
    "rate_class": lambda v, i: optional_name(v, "rate_class", index=i),
    "max_attempts": lambda v, i: whole(v, "max_attempts", minimum=1, index=i),
    "retention_ms": lambda v, i: whole(v, "retention_ms", index=i),
    "lease_ms": lambda v, i: whole(v, "lease_ms", minimum=1, index=i),
    "timeout_ms": lambda v, i: optional_whole(v, "timeout_ms", minimum=1, index=i),
    "crash_limit": lambda v, i: whole(v, "crash_limit", minimum=1, index=i),
}
