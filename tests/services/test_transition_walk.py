"""Walk every (state, event) pair of SPEC section 2.

For each of the 9 states and every event (the sweeps, admit, each ack outcome, release,
reclaim, cancel, release from quarantine, operator retry, evict) a fresh job is driven
into the state and the event applied. An allowed pair must land in a state that
``states.TRANSITIONS`` lists, with attempt / crash_attempt / fence / attempt records
moved exactly as the table says. A refused pair must change nothing (the whole job row,
its runs, its side data and the quarantined fingerprints compare equal) and return or
raise what SPEC says.

The expectations below are written from SPEC, not read from ``TRANSITIONS``, so the
code's table is checked against the spec rather than against itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from boson_django import services
from boson_django.errors import InvalidEnvelope, LeaseRejected
from boson_django.states import TRANSITIONS, Event, JobState, Outcome, allows
from tests.factories import state_of
from tests.services.support import LONG_MS, SNOOZE_MS, drive, job_row, recorded, run_rows, snapshot

STATES = [s.value for s in JobState]
EVENTS: list[Event | Outcome] = [
    Event.PROMOTE, Event.ADMIT, *Outcome, Event.RELEASE, Event.RECLAIM, Event.CANCEL,
    Event.RELEASE_QUARANTINE, Event.RETRY, Event.EVICT,
]
ANY = "<any record>"
RESET = "reset"


def _key(event: Event | Outcome) -> str:
    return f"ack:{event.value}" if isinstance(event, Outcome) else f"event:{event.value}"


@dataclass(frozen=True)
class Effect:
    """What SPEC's table says an allowed pair does (deltas; ``crash=RESET`` means set to 0)."""

    to: str | None
    attempt: int = 0
    crash: int | str = 0
    fence: int = 0
    records: tuple[str, ...] = ()
    opens_run: bool = False


_SPEC_ROWS: dict[tuple[str, Event | Outcome], Effect] = {
    ("scheduled", Event.PROMOTE): Effect("available"),
    ("retryable", Event.PROMOTE): Effect("available"),
    ("available", Event.ADMIT): Effect("running", fence=1, opens_run=True),
    ("running", Outcome.SUCCESS): Effect("completed", attempt=1),
    ("running", Outcome.RETRY): Effect("retryable", attempt=1, records=("retry",)),
    ("running", Outcome.SNOOZE): Effect("scheduled"),
    ("running", Outcome.RATE_LIMITED): Effect("scheduled"),
    ("running", Outcome.SKIP): Effect("skipped", attempt=1, records=("skip",)),
    ("running", Outcome.UNDECODABLE): Effect("failed", attempt=1, records=("undecodable",)),
    ("running", Outcome.DISCARD): Effect("failed", attempt=1, records=("discard",)),
    ("running", Outcome.REVOKE): Effect(None),
    ("running", Event.RELEASE): Effect("available", records=("released",)),
    ("running", Event.RECLAIM): Effect("available", crash=1, records=("lease_lost",)),
    ("scheduled", Event.CANCEL): Effect("cancelled", records=("cancelled",)),
    ("available", Event.CANCEL): Effect("cancelled", records=("cancelled",)),
    ("retryable", Event.CANCEL): Effect("cancelled", records=("cancelled",)),
    ("running", Event.CANCEL): Effect("cancelled", records=("cancelled",)),
    ("quarantined", Event.RELEASE_QUARANTINE): Effect("available", crash=RESET, records=(ANY,)),
    ("failed", Event.RETRY): Effect("available", records=(ANY,)),
    ("cancelled", Event.RETRY): Effect("available", records=(ANY,)),
    ("completed", Event.EVICT): Effect(None),
    ("skipped", Event.EVICT): Effect(None),
    ("failed", Event.EVICT): Effect(None),
    ("cancelled", Event.EVICT): Effect(None),
}

#: Keyed by (state, "ack:x" / "event:x"): ``Event.RETRY == Outcome.RETRY`` as strings, so
#: the enums themselves cannot share a dict.
SPEC_TABLE: dict[tuple[str, str], Effect] = {(s, _key(e)): effect for (s, e), effect in _SPEC_ROWS.items()}

#: What a refused event returns (or raises) per SPEC.
REFUSED_RESULT: dict[str, Any] = {
    _key(Event.PROMOTE): 0, _key(Event.ADMIT): [], _key(Event.RECLAIM): [], _key(Event.CANCEL): False,
    _key(Event.RELEASE_QUARANTINE): False, _key(Event.RETRY): False, _key(Event.EVICT): 0,
}
REFUSED_RAISES: dict[str, type[Exception]] = {
    **{_key(o): LeaseRejected for o in Outcome}, _key(Outcome.LEASE_LOST): InvalidEnvelope,
    _key(Event.RELEASE): LeaseRejected,
}
ACK_KWARGS: dict[Outcome, dict[str, Any]] = {
    Outcome.RETRY: {"error": "boom"},
    Outcome.SNOOZE: {"delay_ms": SNOOZE_MS},
    Outcome.RATE_LIMITED: {"delay_ms": SNOOZE_MS},
}


def _apply(event: Event | Outcome, driven: Any, store_clock: Any) -> Any:
    if isinstance(event, Outcome):
        return services.ack(driven.lease, event, **ACK_KWARGS.get(event, {}))
    if event in (Event.PROMOTE, Event.RECLAIM, Event.EVICT):
        store_clock.advance(LONG_MS)
    calls = {
        Event.PROMOTE: lambda: services.promote_due(100),
        Event.ADMIT: lambda: services.admit("w2", [], 10),
        Event.RELEASE: lambda: services.release(driven.lease),
        Event.RECLAIM: lambda: services.reclaim_expired(100),
        Event.CANCEL: lambda: services.cancel(driven.job_id),
        Event.RELEASE_QUARANTINE: lambda: services.release_quarantined(driven.job_id),
        Event.RETRY: lambda: services.retry(driven.job_id),
        Event.EVICT: lambda: services.evict_retained(100),
    }
    return calls[event]()


def test_the_code_table_is_the_spec_table():
    code = {(s.value, type(ev).__name__, ev.value) for (s, ev) in TRANSITIONS}
    spec = {(s, type(ev).__name__, ev.value) for (s, ev) in _SPEC_ROWS}
    assert code == spec
    for (state, event), effect in _SPEC_ROWS.items():
        assert effect.to in {None if t is None else t.value for t in TRANSITIONS[(JobState(state), event)]}


@pytest.mark.parametrize("event", [Event.RETRY, Event.RELEASE, Event.CANCEL])
def test_operator_events_are_not_confused_with_ack_outcomes(event):
    """An event that shares a word with an outcome must not inherit its rows."""
    assert all(event != outcome for outcome in Outcome)
    for state in JobState:
        assert allows(state, event) == ((state.value, _key(event)) in SPEC_TABLE)


@pytest.mark.parametrize("event", EVENTS, ids=_key)
@pytest.mark.parametrize("state", STATES)
def test_walk(state, event, store_clock):
    driven = drive(state, store_clock)
    before = snapshot(driven.job_id)
    records_before = recorded(driven.job_id)
    effect = SPEC_TABLE.get((state, _key(event)))
    if effect is None:
        _assert_refused(event, driven, before, store_clock)
    else:
        result = _apply(event, driven, store_clock)
        _assert_allowed(state, event, effect, result, driven, before, records_before)


def _assert_refused(event: Event | Outcome, driven: Any, before: dict[str, Any], store_clock: Any) -> None:
    if _key(event) in REFUSED_RAISES:
        with pytest.raises(REFUSED_RAISES[_key(event)]):
            _apply(event, driven, store_clock)
    else:
        assert _apply(event, driven, store_clock) == REFUSED_RESULT[_key(event)]
    assert snapshot(driven.job_id) == before


def _assert_allowed(
    state: str, event: Event | Outcome, effect: Effect, result: Any, driven: Any,
    before: dict[str, Any], records_before: list[str],
) -> None:
    after = state_of(driven.job_id)
    listed = {None if t is None else t.value for t in TRANSITIONS[(JobState(state), event)]}
    assert after in listed
    assert after == effect.to
    _assert_result(event, result, effect)
    if effect.to is None:
        assert job_row(driven.job_id) is None and run_rows(driven.job_id) == []
        return
    old, new = before["job"], job_row(driven.job_id)
    assert new["attempt"] == old["attempt"] + effect.attempt
    assert new["crash_attempt"] == (0 if effect.crash == RESET else old["crash_attempt"] + effect.crash)
    assert new["fence"] == old["fence"] + effect.fence
    added = recorded(driven.job_id)[len(records_before):]
    assert recorded(driven.job_id)[: len(records_before)] == records_before
    assert len(added) == len(effect.records)
    assert all(want in (ANY, got) for want, got in zip(effect.records, added))
    open_runs = [r for r in run_rows(driven.job_id) if r["finished_at"] is None]
    assert len(open_runs) == (1 if effect.opens_run else 0)
    if effect.to != "running":
        assert new["lease_holder"] is None and new["lease_expires_at"] is None


def _assert_result(event: Event | Outcome, result: Any, effect: Effect) -> None:
    if isinstance(event, Outcome):
        assert result == effect.to
    elif event in (Event.PROMOTE, Event.EVICT):
        assert result == 1
    elif event in (Event.CANCEL, Event.RELEASE_QUARANTINE, Event.RETRY):
        assert result is True
    elif event is Event.ADMIT:
        assert len(result) == 1
    elif event is Event.RECLAIM:
        assert [r.state for r in result] == [effect.to]
    else:
        assert result is None
