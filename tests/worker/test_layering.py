"""The worker's modules import one way: no cycle among them (type-only imports count),
and the ack route -- acker, completer, reporting, slots -- never reaches back into the
parts that drive it (runtime, admission, lifecycle)."""

from __future__ import annotations

import ast
from pathlib import Path

import boson_django.worker
from boson_django import drivers
from boson_django.worker.runtime import Worker, WorkerOptions

PACKAGE = Path(boson_django.worker.__file__).parent
PREFIX = "boson_django.worker."


def _imports() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in PACKAGE.glob("*.py"):
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            found |= {name[len(PREFIX):].split(".")[0] for name in names if name.startswith(PREFIX)}
        graph[path.stem] = found - {path.stem}
    return graph


def _reach(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = list(graph.get(start, ()))
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo += graph.get(module, ())
    return seen


def test_no_module_of_the_worker_imports_itself_back():
    graph = _imports()
    assert {"attempt", "executor", "context", "futures"} <= set(graph)
    cycles = sorted(module for module in graph if module in _reach(graph, module))
    assert not cycles, cycles


def test_the_ack_route_never_imports_what_drives_it():
    graph = _imports()
    for module in ("acker", "completer", "reporting", "slots", "attempt", "futures"):
        assert not _reach(graph, module) & {"runtime", "admission", "lifecycle"}, module


def test_the_worker_asks_its_driver_where_acks_are_flushed():
    worker = Worker(WorkerOptions(handle_signals=False))
    assert worker.acker.inline is drivers.for_alias(worker.using).acks_inline
    assert drivers.for_alias(worker.using).acks_inline is (drivers.for_alias(worker.using).vendor == "sqlite")
