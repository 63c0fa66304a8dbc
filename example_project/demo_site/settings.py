"""Settings of the example project.

The store is an embedded SQLite file next to this project (nothing to install or start).
``BOSON_DEMO_DB=postgres`` switches to PostgreSQL, reached with the usual libpq variables
(``PGHOST``, ``PGPORT``, ``PGUSER``, ``PGPASSWORD``; defaults 127.0.0.1:5432, user
``postgres``) and the database ``BOSON_DEMO_PG_NAME`` (default ``boson_demo``), which the
demo creates if it is missing.
"""

import os
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "demo-only-not-secret")
DEBUG = True
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "boson_django",
    "shop",
]
try:  # Django 6 ships django.tasks; Django 5.2 uses the django-tasks backport.
    import django.tasks  # noqa: F401
except ImportError:
    INSTALLED_APPS.insert(0, "django_tasks")

DEMO_DB = os.environ.get("BOSON_DEMO_DB", "sqlite")
if DEMO_DB == "postgres":
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": os.environ.get("BOSON_DEMO_PG_NAME", "boson_demo"),
            "USER": os.environ.get("PGUSER", "postgres"),
            "PASSWORD": os.environ.get("PGPASSWORD", ""),
            "HOST": os.environ.get("PGHOST", "127.0.0.1"),
            "PORT": os.environ.get("PGPORT", "5432"),
        }
    }
elif DEMO_DB == "sqlite":
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": os.environ.get("BOSON_DEMO_SQLITE", str(BASE_DIR / "demo.sqlite3")),
            # Several worker processes share the file: wait for the write lock, take it up front.
            "OPTIONS": {"timeout": 20, "transaction_mode": "IMMEDIATE"},
        }
    }
else:
    raise ImproperlyConfigured(f"BOSON_DEMO_DB must be 'sqlite' or 'postgres', got {DEMO_DB!r}")

# Django's standard Tasks API, with boson_django as the backend.
TASKS = {"default": {"BACKEND": "boson_django.backend.BosonBackend"}}

# Short polls and sweeps so the demo feels live; every other key keeps its default.
BOSON = {
    "POLL_INTERVAL_MS": 250,
    "SWEEP_INTERVAL_MS": 250,
    "CRASH_LIMIT": 3,
}

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]
ROOT_URLCONF = "demo_site.urls"
WSGI_APPLICATION = "demo_site.wsgi.application"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]
USE_TZ = True
TIME_ZONE = "UTC"
STATIC_URL = "static/"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"shop": {"handlers": ["console"], "level": "INFO"}},
}
