"""A stock Wagtail site (``wagtail start``) whose ``TASKS`` backend is boson, with no
module list and with the configuration docs/tasks.md recommends for Wagtail: an editor's
session through Wagtail's admin views answers without a 500, a ``boson_worker --burst``
then runs every job Wagtail enqueued (discarding the index updates of objects deleted
before it ran), and what those jobs leave behind (the reference index, the search index,
the media files) is what Django's ``ImmediateBackend`` leaves for the same session on a
second copy of the site.

Runs on the store this run uses (``BOSON_TEST_DB``): ``make test`` runs it on SQLite and
on PostgreSQL. The editor's session and the dumps are in wagtail_actions.py; the sites in
sites.py.
"""

from __future__ import annotations

import pytest

#: Wagtail's tasks, by the path boson records (``module.function``).
REFERENCE_INDEX = "wagtail.tasks.update_reference_index_task"
SEARCH_INDEX = "modelsearch.tasks.insert_or_update_object_task"
DELETE_FILE = "wagtail.tasks.delete_file_from_storage_task"
PURGE_CACHE = "wagtail.contrib.frontend_cache.tasks.purge_urls_from_cache_task"


def deleted_object(job: dict, made: dict) -> str | None:
    """The class name of the object ``job`` is an index update for, when the session deleted
    that object before any worker ran (the task's arguments are ``app_label, model_name,
    pk``); else None."""
    if job["task"] not in (REFERENCE_INDEX, SEARCH_INDEX):
        return None
    app_label, model_name, pk = job["args"]
    for deleted in made["deleted"]:
        if [app_label, model_name, int(pk)] == deleted[:3]:
            return deleted[3]
    return None


def raced(job: dict) -> bool:
    """Whether ``job`` lost a race for an index row to another job for the same object.

    Wagtail's search backend (modelsearch's database backend) and its reference index
    read, then insert, with no lock: two jobs indexing one object at once (a worker runs ten
    jobs at once by default) can both insert, and the second fails with an IntegrityError
    on the row's unique constraint. Any backend that runs jobs concurrently meets it; the
    job's retry finds the row and updates it."""
    return job["task"] in (REFERENCE_INDEX, SEARCH_INDEX) and job["state"] == "retryable" and "IntegrityError" in job["error"]


def expected_end(job: dict, made: dict, raced_ids: set[str]) -> tuple[str, int, str, str]:
    """Where a job must end once every retry due has run: (state, attempts, last run's
    outcome, last line of its error).

    An index update for a deleted object raises the model's ``DoesNotExist``: under the
    recommended configuration (``discard_on`` ObjectDoesNotExist for ``modelsearch.tasks``
    and ``wagtail``, sites.WAGTAIL_BOSON) it fails at its first attempt, discarded. A job
    that lost a race (:func:`raced`; its id in ``raced_ids``) completes at its second
    attempt, every other job at its first."""
    model = deleted_object(job, made)
    if model:
        return "failed", 1, "discard", f"{model}.DoesNotExist"
    return "completed", 2 if job["id"] in raced_ids else 1, "success", ""


def unexpected(jobs: list[dict], made: dict, raced_ids: set[str]) -> list[str]:
    """The jobs that did not end as :func:`expected_end` says, one line each."""
    wrong = []
    for job in jobs:
        state, attempt, outcome, error = expected_end(job, made, raced_ids)
        if (job["state"], job["attempt"], job["outcome"]) != (state, attempt, outcome) or error not in job["error"]:
            wrong.append(f"{job['task']}{tuple(job['args'])}: {job['state']}, attempt {job['attempt']}, {job['outcome']} "
                         f"({job['error'] or 'no error'}), expected {state}, attempt {attempt}, {outcome} {error}")
    return wrong


@pytest.mark.slow
@pytest.mark.clients
@pytest.mark.timeout(400)  # 35 to 100 s on a shared 2-core machine, on either store
def test_stock_wagtail_site_runs_on_boson_as_on_the_immediate_backend(wagtail_sites):
    boson, immediate = wagtail_sites

    made = boson.actions("operate")
    assert immediate.actions("operate") == made, "the two copies' sessions made different objects"

    queued = boson.actions("jobs")
    tasks = {job["task"] for job in queued}
    assert {REFERENCE_INDEX, SEARCH_INDEX, DELETE_FILE, PURGE_CACHE} <= tasks, f"Wagtail enqueued {sorted(tasks)}"
    assert {job["state"] for job in queued} == {"available"}, queued

    # The store clock stands still during the first burst, so a retry of a job that lost a
    # race is never due in it (on real time, a burst slowed by a loaded machine ran some).
    boson.actions("freeze")
    boson.manage("boson_worker", "--burst", timeout=120)
    first = boson.actions("jobs")
    raced_ids = {job["id"] for job in first if raced(job)}
    wrong = unexpected([job for job in first if job["id"] not in raced_ids], made, raced_ids)
    assert wrong == [], "jobs that did not end as expected:\n" + "\n".join(wrong)
    # A minute on, the retries of the jobs that lost a race are due: a second burst runs
    # them (with no race, it has nothing to do).
    boson.actions("later")
    boson.manage("boson_worker", "--burst", timeout=120)
    ended = boson.actions("jobs")
    wrong = unexpected(ended, made, raced_ids)
    assert wrong == [], "jobs that did not end as expected:\n" + "\n".join(wrong)
    gone = {deleted_object(job, made) for job in ended} - {None}
    assert gone == {"HomePage", "Image"}, f"index updates for deleted objects: {gone}"

    on_boson, reference = boson.actions("dump"), immediate.actions("dump")
    assert set(on_boson) == set(reference)
    for part in sorted(reference):
        assert on_boson[part] == reference[part], f"{part} differs from the immediate backend's"
    assert reference["search"]["Bravo"] == ["Bravo child", "Bravo edited"]
    assert reference["image_search"] == ["Sunset over the bay"]
