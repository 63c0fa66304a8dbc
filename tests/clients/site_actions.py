"""What every client site's own process needs (``python -m tests.clients.<client>_actions
<command>``, from the site's directory, with the site's settings): Django set up, checked
responses, a test image, and -- on the copy whose backend is boson -- its jobs and its
store clock.
"""

from __future__ import annotations

import io
import json
import os
import sys
from collections.abc import Callable

#: The superuser each site's ``createsuperuser`` makes and its sessions log in as.
ADMIN = ("admin", "boson-client-pw")


def expect(response, status: int, what: str):
    """The response's status is ``status``, or the action fails, naming what was done."""
    assert response.status_code == status, f"{what}: HTTP {response.status_code}, expected {status}"
    return response


def png(colour: tuple[int, int, int], size: tuple[int, int] = (64, 48)) -> bytes:
    from PIL import Image as PILImage

    out = io.BytesIO()
    PILImage.new("RGB", size, colour).save(out, "PNG")
    return out.getvalue()


def logged_in_client():
    """Django's test client, as ``localhost`` (which a new project's ``DEBUG`` allows; its
    empty ALLOWED_HOSTS refuses the client's default ``testserver``), logged in."""
    from django.test import Client

    client = Client(SERVER_NAME="localhost")
    assert client.login(username=ADMIN[0], password=ADMIN[1]), "the superuser cannot log in"
    return client


def media_files() -> list[str]:
    """Every file under MEDIA_ROOT, relative to it, sorted."""
    from django.conf import settings

    return sorted(
        os.path.relpath(os.path.join(root, name), settings.MEDIA_ROOT)
        for root, _dirs, names in os.walk(settings.MEDIA_ROOT)
        for name in names
    )


def jobs() -> list[dict]:
    """Boson's jobs: task, arguments, where each ended, its last run's outcome and the last
    line of its last error."""
    from boson_django.models import Job

    found = []
    for job in Job.objects.order_by("enqueued_at", "id"):
        error = job.last_error.strip().splitlines()[-1] if job.last_error.strip() else ""
        last = job.runs.order_by("-attempt", "-started_at").first()
        found.append({"id": job.id, "task": job.task, "args": job.args, "kwargs": job.kwargs, "state": job.state,
                      "attempt": job.attempt, "outcome": last.outcome if last else None, "error": error})
    return found


def freeze() -> str:
    """Stop boson's store clock where it is (seen by every worker): a retry backed off from
    now is not due until :func:`later`, however long a burst takes on a loaded machine."""
    from boson_django import clock

    return clock.freeze().isoformat()


def later() -> str:
    """A minute later on boson's store clock (seen by the next worker): every first retry,
    backed off by at most a second or two, is due."""
    from boson_django import clock

    return clock.advance(60_000).isoformat()


def main(commands: dict[str, Callable[[], object]]) -> None:
    """Set Django up with the site's settings (``DJANGO_SETTINGS_MODULE``, which the test
    sets), run ``sys.argv[1]`` and print its result as JSON."""
    import django

    sys.path.insert(0, os.getcwd())
    django.setup()
    result = {**commands, "jobs": jobs, "freeze": freeze, "later": later}[sys.argv[1]]()
    print(json.dumps(result, sort_keys=True, default=str))
