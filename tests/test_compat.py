"""Which Tasks API boson finds: a project without one is told what to install."""

from __future__ import annotations

import subprocess
import sys

import pytest
from django.core.exceptions import ImproperlyConfigured


def test_without_a_tasks_api_the_error_says_what_to_install():
    # Django 5.2 without the backport (Python 3.12+, where installing boson_django does
    # not bring django-tasks): the import failed with "No module named 'django_tasks'".
    code = (
        "import sys\n"
        "sys.modules['django.tasks'] = None\n"
        "sys.modules['django_tasks'] = None\n"
        "from django.core.exceptions import ImproperlyConfigured\n"
        "try:\n"
        "    import boson_django.compat\n"
        "except ImproperlyConfigured as exc:\n"
        "    print('ImproperlyConfigured:', exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "ImproperlyConfigured: boson_django needs Django's Tasks API" in done.stdout
    assert "pip install django-tasks" in done.stdout


def test_django_6_0_is_refused_saying_why_and_what_to_install():
    # Django 6.0's @task passes no options on: @task(max_attempts=3) raised a TypeError
    # as the project's tasks module was imported, naming neither boson nor the fix.
    from boson_django import compat

    if compat.TASKS_MODULE != "django.tasks":
        with_backport = (5, 2, 0, "final", 0)
        compat.refuse_django_6_0(with_backport)  # the backport passes them: nothing to refuse
        return
    with pytest.raises(ImproperlyConfigured, match=r"Django 6\.1 or later .*this is 6\.0\.10.*Django>=6\.1"):
        compat.refuse_django_6_0((6, 0, 10, "final", 0))
    compat.refuse_django_6_0((6, 1, 0, "final", 0))
    compat.refuse_django_6_0((6, 2, 0, "alpha", 0))
