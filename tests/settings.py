"""Test settings: ``BOSON_TEST_DB=sqlite`` (default) or ``postgres`` picks the store."""

import os
import tempfile

import django

from tests.databases import PREFIX

DB = os.environ.get("BOSON_TEST_DB", "sqlite")
SECRET_KEY = "tests-only-not-secret"
USE_TZ = True
TIME_ZONE = "UTC"
DEBUG = False

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "boson_django",
    "tests.testapp",
]
try:  # Django 5.2 uses the backport; Django 6 ships django.tasks.
    import django.tasks  # noqa: F401
except ImportError:
    INSTALLED_APPS.insert(0, "django_tasks")

if django.VERSION >= (6, 1):  # MAILERS replaces EMAIL_BACKEND; the quickstart's sample task sends mail
    MAILERS = {"default": {"BACKEND": "django.core.mail.backends.locmem.EmailBackend"}}

if DB == "postgres":
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": os.environ.get("BOSON_PG_NAME", "boson"),
            "USER": os.environ.get("BOSON_PG_USER", "postgres"),
            "HOST": os.environ.get("BOSON_PG_HOST", "127.0.0.1"),
            "PORT": os.environ.get("BOSON_PG_PORT", "5432"),
            "TEST": {"NAME": PREFIX},  # BOSON_PG_TEST_NAME; see tests/databases.py
        }
    }
else:
    # Worker subprocesses started by tests inherit BOSON_SQLITE_PATH and share the file.
    _path = os.environ.setdefault(
        "BOSON_SQLITE_PATH", os.path.join(tempfile.gettempdir(), f"boson_test_{os.getpid()}.sqlite3")
    )
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": _path,
            # A file, not :memory:, so that worker subprocesses share the store.
            "TEST": {"NAME": _path},
            "OPTIONS": {"timeout": 20, "transaction_mode": "IMMEDIATE"},
        }
    }

TASKS = {"default": {"BACKEND": "boson_django.backend.BosonBackend"}}
BOSON = {"TASK_MODULES": ["tests.testapp.more_tasks"]}

MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
ROOT_URLCONF = "tests.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
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
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
