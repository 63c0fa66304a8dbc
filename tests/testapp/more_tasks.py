"""A task module outside any app's ``tasks`` module, registered via BOSON["TASK_MODULES"]."""

from boson_django.compat import task


@task
def extra(x: int = 0) -> int:
    return x
