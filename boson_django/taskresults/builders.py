"""Build ``TaskResult`` and ``Task`` instances from values already normalised.

A result read back from the store, or derived from another result, holds JSON that is
already what ``__post_init__`` would make it, and a Task that was validated when it was
declared or enqueued: these builders set the fields by name and skip ``__init__``.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from typing import Any


def _evolved(result: Any, **changes: Any) -> Any:
    """A copy of a TaskResult (or a Task) with ``changes``. Not ``dataclasses.replace``:
    that runs ``__init__`` and so normalises the arguments' JSON again, which a started
    result's already are, and validates a Task again."""
    return _builders(type(result))[1](result, **changes)


def _made(cls: type, **values: Any) -> Any:
    """A TaskResult of arguments read back from the store: their JSON is already what
    ``__post_init__`` would normalise it to, so ``__init__`` is skipped. Fields not given
    keep their defaults; one with no default is required."""
    return _builders(cls)[0](**values)


def _builders(cls: type) -> tuple[Any, Any]:
    """The class's two builders, made once per class: ``make(**fields)`` and
    ``evolve(result, **changes)``, each setting every field by name in one function body
    -- what ``dataclasses`` does for ``__init__``, without ``__post_init__``."""
    built = _BUILDERS.get(cls)
    if built is None:
        built = _BUILDERS[cls] = _compile_builders(cls)
    return built


def _compile_builders(cls: type) -> tuple[Any, Any]:
    fields = [(f.name, f.default) for f in dataclasses.fields(cls)]
    scope: dict[str, Any] = {"cls": cls, "new": object.__new__, "KEEP": _KEEP}
    params, puts, keeps = [], [], []
    for i, (name, default) in enumerate(fields):
        if default is dataclasses.MISSING:
            params.append(name)
        else:
            scope[f"d{i}"] = default
            params.append(f"{name}=d{i}")
        slot = cls.__dict__.get(name)  # a slotted class's field: its descriptor sets it directly
        scope[f"s{i}"] = slot.__set__ if inspect.ismemberdescriptor(slot) else functools.partial(_set_attr, name=name)
        puts.append(f"    s{i}(o, {name})\n")
        keeps.append(f"    s{i}(o, r.{name} if {name} is KEEP else {name})\n")
    source = (
        f"def make(*, {', '.join(params)}):\n    o = new(cls)\n{''.join(puts)}    return o\n"
        f"def evolve(r, *, {', '.join(f'{name}=KEEP' for name, _ in fields)}):\n    o = new(cls)\n{''.join(keeps)}    return o\n"
    )
    exec(source, scope)  # noqa: S102 -- field names of a dataclass, nothing from outside
    return scope["make"], scope["evolve"]


def _set_attr(obj: Any, value: Any, *, name: str) -> None:
    object.__setattr__(obj, name, value)


_BUILDERS: dict[type, tuple[Any, Any]] = {}
_KEEP: Any = object()
