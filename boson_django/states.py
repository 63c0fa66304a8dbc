"""Job states, ack outcomes and the transition table, as data.

Services consult :data:`TRANSITIONS` before every state change, so the table in the
spec and the code cannot drift apart; ``tests/services/test_transition_walk.py`` walks
every (state, event) pair against it.
"""

from __future__ import annotations

import enum


class JobState(str, enum.Enum):
    SCHEDULED = "scheduled"
    AVAILABLE = "available"
    RUNNING = "running"
    RETRYABLE = "retryable"
    COMPLETED = "completed"
    SKIPPED = "skipped"
    FAILED = "failed"
    CANCELLED = "cancelled"
    QUARANTINED = "quarantined"

    def __str__(self) -> str:
        return self.value


class Outcome(str, enum.Enum):
    SUCCESS = "success"
    RETRY = "retry"
    SNOOZE = "snooze"
    SKIP = "skip"
    UNDECODABLE = "undecodable"
    DISCARD = "discard"
    RATE_LIMITED = "rate_limited"
    REVOKE = "revoke"
    LEASE_LOST = "lease_lost"

    def __str__(self) -> str:
        return self.value


class Event(str, enum.Enum):
    """Everything that moves a job, besides the ack outcomes.

    Values must differ from every :class:`Outcome` value: both are ``str`` enums, so an
    equal value would make ``(state, Event.X)`` and ``(state, Outcome.X)`` the same key
    of :data:`TRANSITIONS` (an operator retry would inherit the RETRY ack's rows).
    """

    PROMOTE = "promote_due"
    ADMIT = "admit"
    RELEASE = "release"
    RECLAIM = "reclaim"
    CANCEL = "cancel"
    RELEASE_QUARANTINE = "release_quarantine"
    RETRY = "operator_retry"
    EVICT = "evict"


if {e.value for e in Event} & {o.value for o in Outcome}:
    raise RuntimeError("Event and Outcome values must not overlap")

S = JobState
#: The state after the job is deleted (not a state: the row is gone).
DELETED = None

TERMINAL: frozenset[JobState] = frozenset({S.COMPLETED, S.SKIPPED, S.FAILED, S.CANCELLED})
PENDING: frozenset[JobState] = frozenset({S.SCHEDULED, S.RETRYABLE})
#: States in which a unique_key is held (uniqueness is enforced among these).
UNIQUE_HOLDING: frozenset[JobState] = frozenset(set(S) - TERMINAL)
CANCELLABLE: frozenset[JobState] = frozenset({S.SCHEDULED, S.AVAILABLE, S.RETRYABLE, S.RUNNING})
RETRIABLE_BY_OPERATOR: frozenset[JobState] = frozenset({S.FAILED, S.CANCELLED})

#: (from state, event) -> the set of states it may lead to. ``None`` stands for deleted.
#: An ack's event is its :class:`Outcome`. A pair absent from this table is refused and
#: changes nothing.
TRANSITIONS: dict[tuple[JobState, Event | Outcome], frozenset[JobState | None]] = {
    (S.SCHEDULED, Event.PROMOTE): frozenset({S.AVAILABLE}),
    (S.RETRYABLE, Event.PROMOTE): frozenset({S.AVAILABLE}),
    (S.AVAILABLE, Event.ADMIT): frozenset({S.RUNNING}),
    (S.RUNNING, Outcome.SUCCESS): frozenset({S.COMPLETED, DELETED}),
    (S.RUNNING, Outcome.RETRY): frozenset({S.RETRYABLE, S.FAILED}),
    (S.RUNNING, Outcome.SNOOZE): frozenset({S.SCHEDULED}),
    (S.RUNNING, Outcome.RATE_LIMITED): frozenset({S.SCHEDULED}),
    (S.RUNNING, Outcome.SKIP): frozenset({S.SKIPPED}),
    (S.RUNNING, Outcome.UNDECODABLE): frozenset({S.FAILED}),
    (S.RUNNING, Outcome.DISCARD): frozenset({S.FAILED}),
    (S.RUNNING, Outcome.REVOKE): frozenset({DELETED}),
    (S.RUNNING, Event.RELEASE): frozenset({S.AVAILABLE}),
    (S.RUNNING, Event.RECLAIM): frozenset({S.AVAILABLE, S.QUARANTINED, S.CANCELLED}),
    (S.SCHEDULED, Event.CANCEL): frozenset({S.CANCELLED}),
    (S.AVAILABLE, Event.CANCEL): frozenset({S.CANCELLED}),
    (S.RETRYABLE, Event.CANCEL): frozenset({S.CANCELLED}),
    (S.RUNNING, Event.CANCEL): frozenset({S.CANCELLED}),
    (S.QUARANTINED, Event.RELEASE_QUARANTINE): frozenset({S.AVAILABLE}),
    (S.FAILED, Event.RETRY): frozenset({S.AVAILABLE}),
    (S.CANCELLED, Event.RETRY): frozenset({S.AVAILABLE}),
    (S.COMPLETED, Event.EVICT): frozenset({DELETED}),
    (S.SKIPPED, Event.EVICT): frozenset({DELETED}),
    (S.FAILED, Event.EVICT): frozenset({DELETED}),
    (S.CANCELLED, Event.EVICT): frozenset({DELETED}),
}

#: Outcomes whose ack closes the run as an attempt record (SUCCESS only when logs exist).
RECORDED_OUTCOMES: frozenset[Outcome] = frozenset(
    {Outcome.RETRY, Outcome.SKIP, Outcome.UNDECODABLE, Outcome.DISCARD}
)
#: Outcomes that spend an attempt (``attempt`` + 1).
ATTEMPT_SPENDING: frozenset[Outcome] = frozenset(
    {Outcome.SUCCESS, Outcome.RETRY, Outcome.SKIP, Outcome.UNDECODABLE, Outcome.DISCARD}
)


def from_states(event: Event | Outcome) -> frozenset[JobState]:
    """The states from which ``event`` is allowed."""
    return frozenset(state for (state, ev) in TRANSITIONS if ev == event)


def allows(state: JobState | str, event: Event | Outcome) -> bool:
    return (JobState(state), event) in TRANSITIONS


def ends_in(state: JobState | str, event: Event | Outcome, to: JobState | None) -> bool:
    return to in TRANSITIONS.get((JobState(state), event), frozenset())


class IllegalTransition(RuntimeError):
    """A transition the table does not allow was about to be written: a bug, never a lost
    race (a lost race is refused before anything is decided)."""


def require(state: JobState | str, event: Event | Outcome, to: JobState | None) -> None:
    """Raise :class:`IllegalTransition` unless ``state`` may go to ``to`` on ``event``
    (the check that stays under ``python -O``)."""
    if not ends_in(state, event, to):
        raise IllegalTransition(f"{event!r} may not move a job from {state} to {to if to is not None else 'deleted'}")


#: The states in which a lease is held and its holder may write: those its holder may
#: release the job from.
LEASED: frozenset[JobState] = from_states(Event.RELEASE)


def targets(state: JobState | str, event: Event | Outcome) -> frozenset[JobState | None]:
    """Where ``event`` may take a job in ``state`` (empty: it may not)."""
    return TRANSITIONS.get((JobState(state), event), frozenset())
