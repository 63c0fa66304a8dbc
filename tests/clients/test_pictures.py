"""django-pictures on boson: a ``startproject`` site with its README's model, photos
uploaded through Django's admin; a ``boson_worker --burst`` then renders every size, and
the files are those Django's ``ImmediateBackend`` leaves for the same uploads on a second
copy of the site. No module list, and no boson setting for its ``pictures`` queue.

Django 6 only: django-pictures enqueues through ``django.tasks`` from Django 6 on.
"""

from __future__ import annotations

import pytest

PROCESS = "pictures.tasks.process_picture_with_django_tasks"


@pytest.mark.slow
@pytest.mark.clients
@pytest.mark.timeout(300)
def test_pictures_render_on_boson_as_on_the_immediate_backend(pictures_sites):
    boson, immediate = pictures_sites

    made = boson.actions("operate")
    assert immediate.actions("operate") == made, "the two copies' sessions made different objects"

    queued = boson.actions("jobs")
    # One job per upload, on the queue django-pictures names, enqueued once the admin's
    # transaction committed; the rename re-rendered nothing.
    assert [(job["task"], job["state"], job["kwargs"]["file_name"]) for job in queued] == [
        (PROCESS, "available", f"photos/{name}.png") for name in ("harbour", "dunes", "doomed")
    ], queued
    before = boson.actions("dump")
    assert before["media"] == sorted(f"photos/{name}.png" for name in ("harbour", "dunes", "doomed")), before["media"]

    boson.manage("boson_worker", "--burst", timeout=120)
    ended = boson.actions("jobs")
    assert [(job["state"], job["error"]) for job in ended] == [("completed", "")] * 3, ended

    on_boson, reference = boson.actions("dump"), immediate.actions("dump")
    assert on_boson == reference
    assert len(reference["media"]) > 3, f"the immediate backend rendered nothing: {reference['media']}"
