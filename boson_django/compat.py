"""One import point for Django's Tasks API: ``django.tasks`` (Django 6) or ``django_tasks``."""

from __future__ import annotations

import django

try:
    from django.tasks import (  # type: ignore[import-not-found,unused-ignore]
        DEFAULT_TASK_QUEUE_NAME,
        Task,
        TaskContext,
        TaskResult,
        TaskResultStatus,
        task,
        task_backends,
    )
    from django.tasks.backends.base import BaseTaskBackend  # type: ignore[import-not-found,unused-ignore]
    from django.tasks.base import TaskError  # type: ignore[import-not-found,unused-ignore]
    from django.tasks.exceptions import (  # type: ignore[import-not-found,unused-ignore]
        InvalidTask as InvalidTaskError,
    )
    from django.tasks.exceptions import (  # type: ignore[import-not-found,unused-ignore]
        TaskResultDoesNotExist,
    )
    from django.tasks.signals import (  # type: ignore[import-not-found,unused-ignore]
        log_task_finished,
        log_task_started,
        task_enqueued,
        task_finished,
        task_started,
    )
    from django.tasks.signals import logger as tasks_logger  # type: ignore[import-not-found,unused-ignore]

    TASKS_MODULE = "django.tasks"
except ImportError:  # Django 5.2 with the django-tasks backport
    try:
        import django_tasks  # type: ignore[import-not-found,unused-ignore]  # noqa: F401
    except ImportError:
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured(
            "boson_django needs Django's Tasks API: django.tasks (Django 6) or, on Django 5.2, "
            "the django-tasks backport: pip install django-tasks"
        ) from None
    from django_tasks import (  # type: ignore[no-redef,import-not-found,unused-ignore]
        DEFAULT_TASK_QUEUE_NAME,
        TaskContext,
        TaskResult,
        TaskResultStatus,
        task,
        task_backends,
    )
    from django_tasks.backends.base import BaseTaskBackend  # type: ignore[no-redef,import-not-found,unused-ignore]
    from django_tasks.base import Task, TaskError  # type: ignore[no-redef,import-not-found,unused-ignore]
    from django_tasks.exceptions import (  # type: ignore[no-redef,import-not-found,unused-ignore]
        InvalidTaskError,
        TaskResultDoesNotExist,
    )
    from django_tasks.signals import (  # type: ignore[no-redef,import-not-found,unused-ignore]
        log_task_finished,
        log_task_started,
        task_enqueued,
        task_finished,
        task_started,
    )
    from django_tasks.signals import logger as tasks_logger  # type: ignore[no-redef,import-not-found,unused-ignore]

    TASKS_MODULE = "django_tasks"


def refuse_django_6_0(version: tuple) -> None:
    """Django 6.0's ``@task`` passes no keyword arguments on to the backend's task class,
    so a boson task's policy (``@task(max_attempts=5, rate_class=...)``) fails with a
    ``TypeError`` as its module is imported. Django 6.1 and the backport pass them."""
    if TASKS_MODULE == "django.tasks" and tuple(version[:2]) < (6, 1):
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured(
            f"boson_django needs Django 6.1 or later on Django 6 (this is {'.'.join(map(str, version[:3]))}): "
            "Django 6.0's @task passes no options such as max_attempts or rate_class to the backend. "
            "Upgrade Django (pip install 'Django>=6.1'), or use Django 5.2 with the django-tasks backport"
        )


refuse_django_6_0(django.VERSION)

__all__ = [
    "DEFAULT_TASK_QUEUE_NAME",
    "BaseTaskBackend",
    "InvalidTaskError",
    "Task",
    "TaskContext",
    "TaskError",
    "TaskResult",
    "TaskResultDoesNotExist",
    "TaskResultStatus",
    "TASKS_MODULE",
    "log_task_finished",
    "log_task_started",
    "task",
    "task_backends",
    "task_enqueued",
    "task_finished",
    "task_started",
    "tasks_logger",
]
