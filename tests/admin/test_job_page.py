"""A job's page: nothing of the job is read for a user who may not view it, and a job
whose stored JSON Python cannot decode shows its page with that JSON as text."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from boson_django import services
from boson_django.services import Outcome
from tests.admin.conftest import staff_client
from tests.factories import admit_one, enqueue_one

pytestmark = pytest.mark.django_db

DETAIL_TABLES = ("boson_run", "boson_job_data")


@pytest.mark.parametrize("load", ["", "?load=output", "?load=result"])
def test_a_user_who_may_not_view_jobs_gets_403_before_runs_or_output_are_read(store, load):
    client = staff_client("queues-only", ["view_queue", "view_run"])
    url = reverse("admin:boson_django_job_change", args=[store.failed]) + load
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    assert response.status_code == 403
    read = [q["sql"] for q in queries if any(f'"{table}"' in q["sql"] for table in DETAIL_TABLES)]
    assert not read, read


def test_a_user_who_may_view_jobs_sees_the_runs_and_the_output(viewer_client, store_clock):
    job_id = enqueue_one(queue="seen")
    lease = admit_one(queues=["seen"]).lease
    services.write_output(lease, {"rows": 3})
    services.ack(lease, Outcome.RETRY, error="Traceback: seen")
    url = reverse("admin:boson_django_job_change", args=[job_id])
    assert "Traceback: seen" in viewer_client.get(url).content.decode()
    assert "&#x27;rows&#x27;: 3" in viewer_client.get(url + "?load=output").content.decode()


def _too_deep() -> str:
    """JSON the store accepts but Python's decoder cannot read (see tests/faults/test_payloads.py)."""
    depth = 11_000 if connection.vendor == "postgresql" else 2_000
    text = "[" * depth + "]" * depth
    try:
        json.loads(text)
    except RecursionError:
        return text
    pytest.skip(f"this Python decodes {depth} levels, the most {connection.vendor} stores: no row can be too deep")


def _write(table: str, column: str, text: str, where: str, params: list) -> None:
    cast = "::jsonb" if connection.vendor == "postgresql" else ""
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {table} SET {column} = %s{cast} WHERE {where}", [text, *params])
        assert cursor.rowcount == 1


def test_a_job_whose_json_is_nested_too_deep_shows_its_page_with_the_stored_text(superuser_client, store_clock):
    deep = _too_deep()
    job_id = enqueue_one(queue="deep")
    lease = admit_one(queues=["deep"]).lease
    services.checkpoint(lease, {"step": 1})
    services.write_output(lease, {"rows": 1})
    services.write_progress(lease, 1, 2, "half")
    services.ack(lease, Outcome.SUCCESS, result={"ok": True})
    for column in ("args", "kwargs", "meta", "checkpoint"):
        _write("boson_job", column, deep, "id = %s", [job_id])
    for kind in ("output", "result", "progress"):
        _write("boson_job_data", "data", deep, "job_id = %s AND kind = %s", [job_id, kind])
    url = reverse("admin:boson_django_job_change", args=[job_id])
    body = superuser_client.get(url).content.decode()
    assert body.count("Nested too deep to decode") == 5, "args, kwargs, meta, checkpoint and progress"
    assert body.count("[" * 1_000 + "]") == 5
    for load in ("output", "result"):
        response = superuser_client.get(f"{url}?load={load}")
        assert response.status_code == 200
        shown = response.content.decode().split('id="boson-data"')[1].split('id="boson-attempts"')[0]
        assert "Nested too deep to decode" in shown and "[" * 1_000 in shown
    listed = superuser_client.get(reverse("admin:boson_django_job_changelist") + "?queue=deep")
    assert listed.status_code == 200 and job_id in listed.content.decode()


def _decodes_but_does_not_print() -> str:
    """JSON Python decodes (its C scanner) but cannot print again with an indent (Python
    code, a frame per level): Python 3.12 has such depths, 3.11 none."""
    for depth in range(500, 3_000, 100):
        text = "[" * depth + "]" * depth
        try:
            value = json.loads(text)
        except RecursionError:
            break
        try:
            json.dumps(value, indent=2)
        except RecursionError:
            return text
    pytest.skip("this Python prints again all the JSON it decodes")


def test_json_deep_enough_to_decode_but_not_to_print_again_is_shown_as_stored(superuser_client, store_clock):
    text = _decodes_but_does_not_print()
    job_id = enqueue_one(queue="deepish")
    _write("boson_job", "args", text, "id = %s", [job_id])
    body = superuser_client.get(reverse("admin:boson_django_job_change", args=[job_id])).content.decode()
    assert "Nested too deep to decode" in body and text[: len(text) // 2] + "]" in body
