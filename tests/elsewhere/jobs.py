"""Tasks and non-tasks of a module no installed app holds and no setting lists."""

from boson_django.compat import task


@task
def double(x: int) -> int:
    return 2 * x


def plain(x: int) -> int:
    """A module-level function that is no Task: a row naming it must never run it."""
    raise AssertionError("a plain function ran as a job")


class NotATask:
    """A class: a row naming it must never instantiate it."""

    def __init__(self, *args: object) -> None:
        raise AssertionError("a class ran as a job")


class Holder:
    """A Task reached through a class attribute: its ``module_path`` is not this path."""

    doubled = double
