"""The garbage collector's first threshold while a worker runs.

A worker allocates each job's objects (its admission unit, envelope, attempt,
``TaskResult``s, future) in bursts of a claim batch -- some twenty tracked objects a
job, up to 128 jobs a claim -- and frees them, by reference counting, once the job is
acked. CPython's first-generation threshold (700 allocations) turns those bursts into a
young collection every ~35 jobs; each walks every job object still in flight and
promotes the survivors, and the promoted ones later feed full collections that walk the
whole process. Reference cycles are still collected, only after more allocations; a
job's own objects form none (``Slots.let_go`` drops the attempt's future).

The threshold is process-wide: the first worker of a process raises it and the last one
to stop puts back what it found. ``BOSON["GC_THRESHOLD"] = 0`` leaves it alone.
"""

from __future__ import annotations

import gc
import threading

_lock = threading.Lock()
_running = 0
_found: tuple[int, ...] | None = None


def raise_threshold(first: int) -> None:
    """A worker starts: make the first threshold at least ``first`` (0: leave it)."""
    global _running, _found
    with _lock:
        _running += 1
        if _running > 1 or not first:
            return
        _found = gc.get_threshold()
        if _found[0] < first:
            gc.set_threshold(first, *_found[1:])


def restore_threshold() -> None:
    """A worker stopped: the last one puts back the thresholds the first one found."""
    global _running, _found
    with _lock:
        _running = max(_running - 1, 0)
        if _running or _found is None:
            return
        gc.set_threshold(*_found)
        _found = None
