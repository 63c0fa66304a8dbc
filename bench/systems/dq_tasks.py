"""Task functions for django-q2 in the benchmark."""


def noop() -> None:
    return None


def stamp(path: str, tag: str) -> None:
    from common import send_stamp

    send_stamp(path, tag)
