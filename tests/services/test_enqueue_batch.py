"""A batch large enough for PostgreSQL's COPY (binary, keyless rows, streamed while the
envelopes are checked) writes the rows that enqueueing each envelope on its own writes,
whatever the values, and refuses what the other paths refuse, writing nothing."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import transaction

from boson_django import services
from boson_django.errors import DuplicateJobId, InvalidEnvelope
from boson_django.models import Job, QuarantinedFingerprint, Queue
from tests.factories import ADD, NOOP, envelope
from tests.services.support import sqlite_binding_at_most

from boson_django.drivers.postgresql.enqueue import COPY_FROM
#: Columns that differ between two enqueues of one envelope.
OWN = {"id", "enqueued_at"}


def _envelopes(store_clock, tag: str) -> list:
    later = store_clock.now() + timedelta(minutes=5)
    return [
        envelope(
            ADD if i % 2 else NOOP, queue=f"{tag}-{i % 3}", args=[i, "tab\t", "back\\slash", "ünï😀", None, 1.5],
            kwargs={"b": 2, "a": [1, {"z": "\n"}]}, meta={"m": i}, priority=i % 201 - 100,
            run_at=later if i % 4 == 0 else None, weight=i / 7, timeout_ms=None if i % 5 else 1_000 + i,
            rate_class="rc" if i % 6 == 0 else None, max_attempts=1 + i % 9, retention_ms=i * 1000, lease_ms=1 + i,
        )
        for i in range(COPY_FROM)
    ]


def _rows(ids: list[str]) -> list[dict]:
    found = {row["id"]: row for row in Job.objects.filter(id__in=ids).values()}
    return [{k: v for k, v in found[i].items() if k not in OWN} for i in ids]


def test_a_copied_batch_writes_what_one_by_one_enqueues_write(store_clock):
    batch = [r.id for r in services.enqueue(_envelopes(store_clock, "q"))]
    single = []
    for env in _envelopes(store_clock, "q"):
        with transaction.atomic():
            (result,) = services.enqueue([env])
        single.append(result.id)
    assert _rows(batch) == _rows(single)
    assert {r["state"] for r in _rows(batch)} == {"available", "scheduled"}


def _noops(n: int = 0, **fields) -> list:
    return [envelope(NOOP, args=[i], **fields) for i in range(n or COPY_FROM)]


def test_a_bad_envelope_late_in_a_copied_batch_names_itself_and_writes_nothing(store_clock):
    batch = _noops()
    batch[-1] = envelope(NOOP, priority=500)
    with pytest.raises(InvalidEnvelope, match=rf"envelope\[{len(batch) - 1}\]\.priority"):
        services.enqueue(batch)
    assert Job.objects.count() == 0 and Queue.objects.count() == 0


def test_the_caller_s_transaction_goes_on_after_a_refused_batch(store_clock):
    with transaction.atomic():
        with pytest.raises(InvalidEnvelope):
            services.enqueue([*_noops(), envelope(NOOP, args="not a list")])
        (kept,) = services.enqueue([envelope(NOOP, queue="kept")])
    assert list(Job.objects.values_list("id", flat=True)) == [kept.id]


def test_ids_are_checked_after_every_envelope_of_a_copied_batch(store_clock):
    services.enqueue([envelope(NOOP, id="taken")])
    with pytest.raises(DuplicateJobId, match="'taken' already exists"):
        services.enqueue([*_noops(), envelope(NOOP, id="taken")])
    with pytest.raises(DuplicateJobId, match="'twice' appears twice"):
        services.enqueue([envelope(NOOP, id="twice"), *_noops(), envelope(NOOP, id="twice")])
    with pytest.raises(InvalidEnvelope, match=r"\.weight"):
        services.enqueue([envelope(NOOP, id="taken"), *_noops(), envelope(NOOP, weight=-1)])
    assert Job.objects.count() == 1


def test_a_copied_batch_parks_quarantined_fingerprints_and_keeps_unique_keys(store_clock):
    QuarantinedFingerprint.objects.create(fingerprint="fp-bad", task=NOOP, job_id="gone", quarantined_at=store_clock.now())
    (holder,) = services.enqueue([envelope(NOOP, unique_key="held")])
    batch = [*_noops(), envelope(NOOP, fingerprint="fp-bad"), envelope(NOOP, fingerprint="fp-bad", unique_key="k-bad"),
             envelope(NOOP, unique_key="held"), envelope(NOOP, unique_key="new")]
    results = services.enqueue(batch)
    states = dict(Job.objects.values_list("id", "state"))
    assert [states[r.id] for r in results[-4:-1]] == ["quarantined", "quarantined", "available"]
    assert (results[-2].id, results[-2].disposition) == (holder.id, "duplicate")
    assert results[-1].disposition == "created" and states[results[-1].id] == "available"
    assert {states[r.id] for r in results[:-4]} == {"available"}
    assert [e.outcome for e in services.errors(results[-4].id)] == ["quarantined"]
    assert [e.outcome for e in services.errors(results[-3].id)] == ["quarantined"]


def test_a_batch_larger_than_sqlite_binds_is_enqueued_whole(store_clock):
    """SQLite refuses a statement binding more parameters than its limit: a batch of 50
    jobs (25 columns each) failed with "too many SQL variables" where it binds 999
    (before 3.32), one of 32,767 at its default since -- whatever the batch's shape."""
    held = services.enqueue([envelope(NOOP, queue="bound", unique_key="k-0")])[0].id
    batch = [envelope(NOOP, queue="bound", args=[i], unique_key=f"k-{i}") for i in range(1_000)]
    with sqlite_binding_at_most():
        results = services.enqueue(batch)
    assert [r.disposition for r in results] == ["duplicate"] + ["created"] * 999
    assert results[0].id == held
    assert Job.objects.filter(queue="bound").count() == 1_000
