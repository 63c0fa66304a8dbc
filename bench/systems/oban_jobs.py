"""Oban (Python) jobs for the benchmark; the worker imports them by name."""

from oban import job


@job(queue="default")
def noop() -> None:
    return None


@job(queue="default")
def stamp(path: str, tag: str) -> None:
    from common import send_stamp

    send_stamp(path, tag)
