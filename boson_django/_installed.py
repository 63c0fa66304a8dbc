"""Imported first by :mod:`boson_django.backend`: a ``TASKS`` entry naming
``BosonBackend`` without ``boson_django`` in ``INSTALLED_APPS`` fails saying so, not with
the model error of the first boson module that defines one. ``apps_ready``, not
``ready``: an app's models module that declares a task builds the backend while Django
still loads the apps, and the installed apps are known by then."""

from django.apps import apps
from django.core.exceptions import ImproperlyConfigured

if apps.apps_ready and not apps.is_installed("boson_django"):
    raise ImproperlyConfigured(
        "TASKS names boson_django.backend.BosonBackend, but 'boson_django' is not in INSTALLED_APPS: "
        "add it (its models hold the queue), then run `manage.py migrate`."
    )
