"""The no-op and wake-up tasks boson runs in the benchmark (``BOSON['TASK_MODULES']``)."""

from boson_django.compat import task


@task
def noop() -> None:
    return None


@task
def stamp(path: str, tag: str) -> None:
    from common import send_stamp

    send_stamp(path, tag)
