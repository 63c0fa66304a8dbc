"""A failed, retrying or quarantined job's page opens with why: state, the error's first
line (for quarantine, crashes and fingerprint), when it runs next, and the buttons. Runs
say ``failed`` for the attempt that failed the job, and a success is never a red cross."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from boson_django import services
from boson_django.admin import display
from boson_django.services import Outcome
from tests.factories import admit_one, enqueue_one

pytestmark = pytest.mark.django_db

ERROR = "shop.mail.SMTPRefused: <script>alert(1)</script> refused\nTraceback (most recent call last):\n  File \"x.py\""


def page(client, job_id: str) -> str:
    response = client.get(reverse("admin:boson_django_job_change", args=[job_id]))
    assert response.status_code == 200
    return response.content.decode()


def panel(body: str) -> str:
    """The summary panel, which must come before the envelope's fieldset."""
    assert 'id="boson-failure"' in body, "no summary panel"
    start = body.index('id="boson-failure"')
    assert start < body.index("Envelope</h2>")
    return body[start: body.index("Envelope</h2>")]


def failing(queue: str, attempts: int, fails: int, clock) -> str:
    job_id = enqueue_one(queue=queue, max_attempts=attempts)
    for n in range(fails):
        if n:
            clock.advance(45_000)
            services.promote_due(10)
        services.ack(admit_one("web-3:4100", [queue]).lease, Outcome.RETRY, delay_ms=45_000, error=ERROR)
    return job_id


def test_a_failed_job_opens_with_its_state_why_and_retry(operator_client, store_clock):
    job_id = failing("mail", attempts=2, fails=2, clock=store_clock)
    shown = panel(page(operator_client, job_id))
    assert ">Failed</h2>" in shown
    assert "attempt 2 of 2 failed: no attempts left" in shown
    assert "shop.mail.SMTPRefused: &lt;script&gt;alert(1)&lt;/script&gt; refused" in shown
    assert "<script>alert(1)" not in shown and "Traceback" not in shown, "the first line only, escaped"
    assert "never: a retry gives it one more attempt" in shown
    assert 'class="button boson-op-retry"' in shown


def test_a_retrying_job_says_when_it_runs_next(operator_client, store_clock):
    job_id = failing("mail", attempts=5, fails=1, clock=store_clock)
    store_clock.advance(15_000)  # 15 s after the failure: 30 s to wait
    shown = panel(page(operator_client, job_id))
    assert ">Failed, will retry</h2>" in shown and "attempt 1 of 5 failed; 4 left" in shown
    assert "(in 30s)" in shown
    assert 'class="button boson-op-cancel"' in shown


def test_a_quarantined_job_shows_its_crashes_fingerprint_and_release_for_who_may(superuser_client, operator_client, store):
    shown = panel(page(superuser_client, store.quarantined))
    assert ">Quarantined</h2>" in shown and "crashed 1 time (crash limit 1)" in shown
    assert "LeaseLost: lease expired" in shown and "on w1 at" in shown
    assert "quarantinedfingerprint/" in shown and "no other copy quarantined under it" in shown
    assert "not until released" in shown and "boson-op-release" in shown
    assert "boson-op-release" not in panel(page(operator_client, store.quarantined)), "no release_quarantine"


def test_a_viewer_reads_the_summary_without_buttons(viewer_client, store):
    assert "boson-op-" not in panel(page(viewer_client, store.failed))


@pytest.mark.parametrize("state", ["available", "running", "completed", "cancelled", "scheduled"])
def test_jobs_in_other_states_open_as_before(superuser_client, store, state):
    assert 'id="boson-failure"' not in page(superuser_client, getattr(store, state))


def test_no_job_page_has_an_empty_close_button(superuser_client, store):
    for state in ("failed", "completed", "running"):
        body = page(superuser_client, getattr(store, state))
        assert 'class="closelink"' not in body and 'class="submit-row"' not in body


def test_the_attempt_that_failed_the_job_says_failed_here_and_in_the_runs_list(superuser_client, store_clock):
    job_id = failing("mail", attempts=2, fails=2, clock=store_clock)
    services.retry(job_id)  # one more attempt, which fails too
    services.ack(admit_one("web-3:4100", ["mail"]).lease, Outcome.RETRY, error=ERROR)
    attempts = page(superuser_client, job_id).split('id="boson-attempts"')[1]
    labels = re.findall(r'class="boson-badge"[^>]*>([a-z_]+)</span>', attempts)
    assert labels == ["failed", "retried", "failed", "retry"], "newest first"
    runs = superuser_client.get(reverse("admin:boson_django_run_changelist")).content.decode()
    cells = re.findall(r'<td class="field-outcome_badge">#(\d) <span class="boson-badge"[^>]*>([a-z_]+)</span>', runs)
    assert cells == [("3", "failed"), ("2", "retried"), ("2", "failed"), ("1", "retry")]


def test_a_success_is_green_in_the_runs_list_never_a_red_cross(superuser_client, store_clock):
    enqueue_one(queue="ok")
    services.ack(admit_one("w1", ["ok"]).lease, Outcome.SUCCESS)  # no logs: not an attempt record
    body = superuser_client.get(reverse("admin:boson_django_run_changelist")).content.decode()
    assert "icon-no.svg" not in body and "icon-yes.svg" not in body
    assert f'background:{display.OUTCOME_COLOURS["success"]}' in body and ">success</span>" in body


@pytest.mark.parametrize("text, line", [
    ("builtins.ValueError: bad\nTraceback (most recent call last):\n  File x", "builtins.ValueError: bad"),
    ("Traceback (most recent call last):\n  File \"x.py\", line 1\nValueError: bad\n", "ValueError: bad"),
    ("", ""),
])
def test_the_first_line_of_an_error_names_its_exception(text, line):
    assert display.first_line(text) == line


@pytest.mark.parametrize("changelist", ["job", "failedjob", "quarantinedjob", "lease", "run"])
def test_list_cells_are_cut_with_the_whole_text_in_their_title(superuser_client, store, changelist):
    body = superuser_client.get(reverse(f"admin:boson_django_{changelist}_changelist")).content.decode()
    titled = re.findall(r'<span class="boson-cut boson-cut-(\w+)" title="([^"]*)"', body)
    kinds = {kind for kind, _ in titled}
    assert {"id", "task"} <= kinds, kinds
    assert all(len(title) for _, title in titled)
    assert "tests.testapp.tasks." in body
