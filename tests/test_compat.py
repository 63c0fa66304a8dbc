"""Which Tasks API boson finds: a project without one is told what to install."""

from __future__ import annotations

import subprocess
import sys


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
