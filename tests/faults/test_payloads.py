"""Payloads: 1 MB and 16 MB arguments run; one byte over the limit is refused and writes
nothing; stored arguments corrupted by SQL end UNDECODABLE while the worker goes on."""

from __future__ import annotations

import json

import pytest
from django.db import connection

from boson_django import conf, services
from boson_django.errors import InvalidEnvelope
from boson_django.models import Job
from boson_django.services import Envelope
from tests.faults.checker import assert_sound, effects_of
from tests.faults.support import enqueue_many
from tests.testapp import fault_tasks  # noqa: F401 -- registers the tasks in this process

SIZED = "tests.testapp.fault_tasks.sized"
EFFECT = "tests.testapp.fault_tasks.effect"
MIB = 1024 * 1024


def _encoded_size(text: str) -> int:
    return len(b'["' + text.encode() + b'"]') + len(b"{}") * 2  # args + kwargs + meta, as JSON


@pytest.mark.parametrize("size", [MIB, pytest.param(16 * MIB, marks=pytest.mark.slow)], ids=["1MB", "16MB"])
def test_large_payloads_run_to_completion(live_clock, workers, size):
    limit = conf.get().MAX_PAYLOAD_BYTES
    assert limit == 16 * MIB
    text = "x" * (min(size, limit) - (_encoded_size("") if size >= limit else 0))
    (job_id,) = enqueue_many(SIZED, 1, args=[text])
    worker = workers(f"w-{size}", "--burst")
    assert worker.exit_code(timeout=120) == 0, worker.text()
    assert services.get_result(job_id).data == len(text) and effects_of(job_id) == [1]
    assert_sound([job_id])


def test_one_byte_over_the_limit_is_refused_and_nothing_is_written(live_clock):
    limit = conf.get().MAX_PAYLOAD_BYTES
    text = "x" * (limit - _encoded_size("") + 1)
    before = Job.objects.count()
    with pytest.raises(InvalidEnvelope, match="args"):
        services.enqueue([Envelope(task=EFFECT, args=[], kwargs={}), Envelope(task=SIZED, args=[text])])
    assert Job.objects.count() == before


def _corrupt(job_id: str, column: str, text: str) -> None:
    cast = "::jsonb" if connection.vendor == "postgresql" else ""
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE boson_job SET {column} = %s{cast} WHERE id = %s", [text, job_id])


def _nested_text(depth: int) -> str:
    return "[" * depth + "]" * depth


def _deeper_than_python_decodes() -> str:
    """JSON nested deeper than Python's decoder goes (3.11: under 1,000 levels; 3.12:
    1,000-1,500; 3.13: 9,998, its C recursion limit) that the store still accepts:
    PostgreSQL's jsonb ~12,000 levels with the default ``max_stack_depth``, SQLite's
    ``JSON_VALID`` 2,000. Python 3.13 decodes 2,000 levels: on SQLite no stored row can
    be too deep for it, and there is nothing to test."""
    depth = 11_000 if connection.vendor == "postgresql" else 2_000
    try:
        json.loads(_nested_text(depth))
    except RecursionError:
        return _nested_text(depth)
    pytest.skip(f"this Python decodes {depth} levels, the most {connection.vendor} stores: no row can be too deep")


CORRUPTIONS = {
    "args not a list": ("args", '{"not": "a list"}'),
    "kwargs not a dict": ("kwargs", "[1, 2]"),
    "args a bare string": ("args", '"text"'),
    "args null": ("args", "null"),
    "args nested deeper than Python decodes": ("args", _deeper_than_python_decodes),
    "checkpoint nested deeper than Python decodes": ("checkpoint", _deeper_than_python_decodes),
}
# Text that is not JSON at all cannot be stored: jsonb refuses it on PostgreSQL and Django's
# JSON_VALID check constraint on SQLite, so a corrupted row is always valid JSON of a wrong shape.


@pytest.mark.parametrize("corruption", list(CORRUPTIONS), ids=list(CORRUPTIONS))
def test_stored_arguments_made_undecodable_end_failed_and_the_worker_goes_on(live_clock, workers, corruption):
    column, text = CORRUPTIONS[corruption]
    if callable(text):
        text = text()
    (bad,) = enqueue_many(EFFECT, 1, priority=10)
    good = enqueue_many(EFFECT, 3)
    _corrupt(bad, column, text)
    worker = workers("w-undecodable", "--burst")
    assert worker.exit_code() == 0, worker.text()
    found = Job.objects.filter(id=bad).values("state", "attempt").get()
    assert found == {"state": "failed", "attempt": 1}
    (record,) = services.errors(bad)
    assert record.outcome == "undecodable" and "UndecodableJob" in record.error
    assert all(effects_of(j) == [1] for j in good) and effects_of(bad) == []
    assert_sound([bad, *good])


def _nested(depth: int) -> list:
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


def test_arguments_nested_too_deep_are_refused_at_enqueue_not_left_to_crash_a_worker(live_clock):
    from boson_django.validation import MAX_JSON_DEPTH

    (ok,) = enqueue_many(EFFECT, 1)
    with pytest.raises(InvalidEnvelope, match="nested deeper"):
        services.enqueue([Envelope(task=EFFECT, args=_nested(MAX_JSON_DEPTH + 1))])
    with pytest.raises(InvalidEnvelope, match="nested deeper"):
        services.enqueue([Envelope(task=EFFECT, args=[], meta={"deep": _nested(5_000)})])
    (fits,) = services.enqueue([Envelope(task=EFFECT, args=[_nested(MAX_JSON_DEPTH - 2)])])
    assert services.job_state(fits.id)[1] == "available"
    assert_sound([ok, fits.id])
