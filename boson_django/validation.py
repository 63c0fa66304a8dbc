"""Input checks shared by every public entry point. Each error names its field."""

from __future__ import annotations

import json
import math
from datetime import datetime
from typing import Any

from boson_django.errors import InvalidEnvelope

PRIORITY_MIN, PRIORITY_MAX = -100, 100
MAX_NAME = 100
MAX_KEY = 255


def name(value: Any, field: str, *, index: int | None = None, max_len: int = MAX_NAME) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidEnvelope(field, f"must be a non-empty string, got {value!r}", index=index)
    if len(value) > max_len:
        raise InvalidEnvelope(field, f"must be at most {max_len} characters", index=index)
    return value


def optional_name(value: Any, field: str, *, index: int | None = None, max_len: int = MAX_NAME) -> str | None:
    return None if value is None else name(value, field, index=index, max_len=max_len)


def whole(value: Any, field: str, *, minimum: int = 0, index: int | None = None) -> int:
    """An integer >= minimum (floats with no fraction are accepted; bools are not)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidEnvelope(field, f"must be a whole number, got {value!r}", index=index)
    if isinstance(value, float) and (not math.isfinite(value) or not value.is_integer()):
        raise InvalidEnvelope(field, f"must be a finite whole number, got {value!r}", index=index)
    if value < minimum:
        raise InvalidEnvelope(field, f"must be >= {minimum}, got {value!r}", index=index)
    return int(value)


def optional_whole(value: Any, field: str, *, minimum: int = 0, index: int | None = None) -> int | None:
    return None if value is None else whole(value, field, minimum=minimum, index=index)


def amount(value: Any, field: str, *, index: int | None = None) -> float:
    """A finite number >= 0 (weights)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidEnvelope(field, f"must be a number, got {value!r}", index=index)
    if not math.isfinite(value) or value < 0:
        raise InvalidEnvelope(field, f"must be a finite number >= 0, got {value!r}", index=index)
    return float(value)


def delay(value: Any, field: str = "delay_ms", *, required_positive: bool = False) -> int | None:
    if value is None:
        if required_positive:
            raise InvalidEnvelope(field, "is required (> 0)")
        return None
    ms = amount(value, field)
    if ms > 10**15:
        raise InvalidEnvelope(field, f"is out of range: {value!r}")
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


def aware(value: Any, field: str, *, index: int | None = None) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise InvalidEnvelope(field, f"must be an aware datetime, got {value!r}", index=index)
    return value


def json_text(value: Any, field: str, *, index: int | None = None) -> str:
    """The canonical JSON of ``value``; anything JSON cannot hold is refused."""
    _check_json(value, field, index)
    try:
        return json.dumps(value, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidEnvelope(field, f"is not JSON: {exc}", index=index) from None


def _check_json(value: Any, field: str, index: int | None) -> None:
    """Refuse what json.dumps would silently change (tuples keep, non-str keys do not)."""
    if value is None or isinstance(value, (str, bool, int)):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidEnvelope(field, f"is not JSON: {value!r} is not a finite number", index=index)
        return
    if isinstance(value, (list, tuple)):
        for item in value:
            _check_json(item, field, index)
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidEnvelope(field, f"is not JSON: key {key!r} is not a string", index=index)
            _check_json(item, field, index)
        return
    raise InvalidEnvelope(field, f"is not JSON: {type(value).__name__} {value!r:.60}", index=index)
