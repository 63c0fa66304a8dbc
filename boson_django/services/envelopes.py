"""Envelopes into job rows: what an enqueue checks and how it completes them.

An envelope's own fields are validated (:class:`Checks`); what it leaves unset comes from
the task's TaskConfig row, then ``TASK_POLICIES``, then @task defaults, then settings
(:class:`Policies`). Nothing here reads or writes the store.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from boson_django import conf, ids, policies, registry, validation
from boson_django.errors import InvalidEnvelope
from boson_django.services import config
from boson_django.services.types import Envelope
from boson_django.states import JobState

POLICY_CHECKS = validation.POLICY_CHECKS
#: The policy an envelope may give itself, in the order it is checked (``crash_limit``
#: comes from TaskConfig, code or settings only).
_GIVEN_CHECKS: dict[str, Callable[[Any, int], Any]] = {
    "queue": POLICY_CHECKS["queue"],
    "priority": POLICY_CHECKS["priority"],
    "unique_key": lambda v, i: validation.name(v, "unique_key", index=i, max_len=255, key=True),
    **{name: POLICY_CHECKS[name] for name in (
        "weight", "rate_class", "max_attempts", "retention_ms", "lease_ms", "timeout_ms")},
}

#: The checks of a task's defaults: its policy, and a fixed unique key when it has one.
_DEFAULT_CHECKS: dict[str, Callable[[Any, int], Any]] = {
    "unique_key": lambda v, i: None if v is None else _GIVEN_CHECKS["unique_key"](v, i),
    **POLICY_CHECKS,
}


class Checks:
    """Validates what envelopes say themselves, for one call (each task's registration
    is looked up once)."""

    def __init__(self) -> None:
        self._registered: set[str] = set()
        self._limit = conf.get().MAX_PAYLOAD_BYTES

    def check(self, env: Any, index: int | None) -> dict[str, Any]:
        """The envelope's own fields, validated; the policy fields it gives (not None)."""
        if not isinstance(env, Envelope):
            raise InvalidEnvelope("envelope", f"must be an Envelope, got {type(env).__name__}", index=index)
        task = env.task
        if type(task) is not str or task not in self._registered:
            task = self._task(task, index)
        values: dict[str, Any] = {"task": task, **_payload(env, self._limit, index)}
        for name, check in _GIVEN_CHECKS.items():
            given = getattr(env, name)
            if given is not None:
                values[name] = check(given, index)
        run_at, given_id, fingerprint = env.run_at, env.id, env.fingerprint
        values["run_at"] = None if run_at is None else validation.aware(run_at, "run_at", index=index)
        values["id"] = ids.new_id() if given_id is None else validation.job_id(given_id, index=index)
        values["fingerprint"] = (
            policy_fingerprint(task, env) if fingerprint is None
            else validation.name(fingerprint, "fingerprint", index=index, max_len=64, key=True)
        )
        values.update(_FRESH)
        return values

    def _task(self, task: Any, index: int | None) -> str:
        task = validation.name(task, "task", index=index, max_len=255)
        if not registry.is_registered(task):
            why = registry.why_unknown(task)
            raise InvalidEnvelope("task", f"unknown task {task!r}: not a module-level task of a boson backend ({why})", index=index)
        self._registered.add(task)
        return task


#: The counters every new job starts with.
_FRESH = {"attempt": 0, "crash_attempt": 0, "fence": 0, "charged_weight": 0.0, "last_error": ""}


@dataclass
class Policies:
    """Completes checked envelopes into job rows for one call: what an envelope left
    unset comes from TaskConfig (``configs``), then @task defaults, then settings. Each
    task's defaults are resolved and checked once; a default that fails its check is an
    error only for the envelopes that rely on it, reported at the first one."""

    configs: dict[str, dict[str, Any]]
    _defaults: dict[str, tuple[dict[str, Any], dict[str, Any]]] = field(default_factory=dict)

    def resolve(self, values: dict[str, Any], index: int | None, unique: bool) -> dict[str, Any]:
        """A new row: ``values`` over the task's defaults."""
        valid, invalid = self._defaults.get(values["task"]) or self._resolve(values["task"])
        for name in invalid.keys() - values.keys() if invalid else ():
            if name != "unique_key" or unique:  # unique=False stores no key: the task's is not used
                _DEFAULT_CHECKS[name](invalid[name], index)  # raises, naming the field
        row = {**valid, **values}
        if not unique:
            row["unique_key"] = None
        elif values["task"] in self.configs:
            uniqueness = self.configs[values["task"]].get("uniqueness")
            row["unique_key"] = policies.unique_key_under(uniqueness, row["unique_key"], row["fingerprint"])
        return row

    def _resolve(self, task: str) -> tuple[dict[str, Any], dict[str, Any]]:
        row = self.configs.get(task)
        resolved = _checked_defaults(config.resolve(task, {}, row)) if row else _code_defaults(task)
        self._defaults[task] = resolved
        return resolved


#: A task's resolved defaults when it has no TaskConfig row, kept across calls with what
#: they came from -- the settings object (``override_settings`` makes a new one) and the registered
#: Task (frozen) -- and used only while both are still the ones in force.
_CODE_DEFAULTS: dict[str, tuple[Any, Any, tuple[dict[str, Any], dict[str, Any]]]] = {}


def _code_defaults(task: str) -> tuple[dict[str, Any], dict[str, Any]]:
    settings, code = conf.get(), registry.get(task)
    known = _CODE_DEFAULTS.get(task)
    if known is not None and known[0] is settings and known[1] is code:
        return known[2]
    resolved = _checked_defaults(config.resolve(task, {}, {}))
    _CODE_DEFAULTS[task] = settings, code, resolved
    return resolved


def _checked_defaults(base: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The defaults that pass their check, and those that fail it (an error only for the
    envelopes that rely on them)."""
    valid, invalid = {}, {}
    for name, check in _DEFAULT_CHECKS.items():
        try:
            valid[name] = check(base[name], 0)
        except InvalidEnvelope:
            invalid[name] = base[name]
    return valid, invalid


_T = TypeVar("_T")


def numbered(items: Sequence[_T]) -> Iterator[tuple[int | None, _T]]:
    """Each item with the index an error names it by: none for a batch of one, so that
    ``task.enqueue(...)``, which never saw a list, is told ``args: ...``, not
    ``envelope[0].args: ...``."""
    if len(items) == 1:
        yield None, items[0]
    else:
        yield from enumerate(items)


def _payload(env: Envelope, limit: int, index: int | None) -> dict[str, str]:
    """args, kwargs and meta as JSON text, within ``limit`` (MAX_PAYLOAD_BYTES) together."""
    if not isinstance(env.args, (list, tuple)):
        raise InvalidEnvelope("args", f"must be a list, got {type(env.args).__name__}", index=index)
    if not isinstance(env.kwargs, dict):
        raise InvalidEnvelope("kwargs", f"must be a dict, got {type(env.kwargs).__name__}", index=index)
    if not isinstance(env.meta, dict):
        raise InvalidEnvelope("meta", f"must be a dict, got {type(env.meta).__name__}", index=index)
    texts = {
        "args": validation.json_text(env.args, "args", index=index),
        "kwargs": validation.json_text(env.kwargs, "kwargs", index=index),
        "meta": validation.json_text(env.meta, "meta", index=index),
    }
    size = len(texts["args"]) + len(texts["kwargs"]) + len(texts["meta"])  # ASCII JSON: characters are bytes
    if size > limit:
        largest = max(texts, key=lambda f: len(texts[f]))
        raise InvalidEnvelope(
            largest, f"payload (args+kwargs+meta) of {size} bytes exceeds MAX_PAYLOAD_BYTES={limit}", index=index
        )
    return texts


def policy_fingerprint(task: str, env: Envelope) -> str:
    return policies.fingerprint(task, list(env.args), env.kwargs)


def initial_state(values: dict[str, Any], now: datetime, parked: Mapping[str, Any]) -> JobState:
    """Fill run_at before parking, so a quarantined row has one (the column is NOT NULL)."""
    due = values["run_at"] is None or values["run_at"] <= now
    if due:
        values["run_at"] = now
    if values["fingerprint"] in parked:
        return JobState.QUARANTINED
    return JobState.AVAILABLE if due else JobState.SCHEDULED


