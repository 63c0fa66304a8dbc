"""Keys derived from a task and one call's arguments, shared by the backend and the scheduler."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def unique_key_for(task: Any, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str | None:
    """The unique key of one call of ``task``: what its ``unique_key`` function returns for
    the call's arguments, else its fixed key (None when it has neither, or for None)."""
    key = getattr(task, "unique_key", None)
    return key(*args, **kwargs) if callable(key) else key
