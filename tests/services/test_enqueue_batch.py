"""A batch large enough for PostgreSQL's COPY (binary, keyless rows) writes the rows that
enqueueing each envelope on its own writes, whatever the values."""

from __future__ import annotations

import sys
from datetime import timedelta

from django.db import transaction

from boson_django import services
from boson_django.models import Job
from tests.factories import ADD, NOOP, envelope

enqueue_module = sys.modules["boson_django.services.enqueue"]
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
        for i in range(enqueue_module.COPY_FROM)
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
