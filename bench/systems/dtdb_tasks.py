"""Django Tasks for django-tasks-db in the benchmark (Django >= 6)."""

from django.tasks import task


@task
def noop() -> None:
    return None


@task
def stamp(path: str, tag: str) -> None:
    from common import send_stamp

    send_stamp(path, tag)
