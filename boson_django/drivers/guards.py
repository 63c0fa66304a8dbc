"""State guards of SQL statements, generated from :data:`boson_django.states.TRANSITIONS`.

A statement that moves jobs tests their state with the fragment for its event, so the
states a transition accepts are written once, in the table, and never as literals in SQL.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

from boson_django.states import Event, JobState, Outcome, from_states


@functools.cache
def allowed(event: Event | Outcome, column: str = "state") -> str:
    """``column IN ('a', 'b')``: the states ``event`` may move a job from. Usable by an
    index on the state (a sweep scanning the jobs of those states)."""
    return f"{column} IN ({_listed(event)})"


@functools.cache
def allowed_by_key(event: Event | Outcome, column: str = "state") -> str:
    """:func:`allowed`, written so that it matches no partial index, for statements that
    find their jobs by key: with ``state = 'running'`` beside the keys, a planner whose
    statistics of the queue table are stale walks that state's partial index and filters
    every job in it for the keys."""
    return f"{column} || '' IN ({_listed(event)})"


def state(value: JobState) -> str:
    """A state as an SQL literal (a target state; guards come from :func:`allowed`)."""
    return f"'{JobState(value).value}'"


def _listed(event: Event | Outcome) -> str:
    states = sorted(s.value for s in from_states(event))
    if not states:
        raise ValueError(f"no state may take {event!r}: not in the transition table")
    return ", ".join(f"'{s}'" for s in states)


def leased(column: str = "state") -> str:
    """A held lease's state test (:data:`~boson_django.states.LEASED`), by key."""
    return allowed_by_key(Event.RELEASE, column)


def among(states: Iterable[JobState], column: str = "state", *, negate: bool = False) -> str:
    """``column IN (...)`` (``NOT IN`` with ``negate``) for a set of states named in
    :mod:`boson_django.states` (``LEASED``, ``TERMINAL``...): a check, not a transition."""
    listed = ", ".join(state(s) for s in sorted(states, key=lambda s: s.value))
    return f"{column} {'NOT IN' if negate else 'IN'} ({listed})"
