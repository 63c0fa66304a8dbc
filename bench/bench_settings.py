"""Django settings of boson in the benchmark: ``BENCH_DB=postgres`` (default) or ``sqlite``."""

import os

SECRET_KEY = "bench-only"
USE_TZ = True
TIME_ZONE = "UTC"
DEBUG = False
INSTALLED_APPS = ["django.contrib.contenttypes", "django.contrib.auth", "boson_django"]
try:
    import django.tasks  # noqa: F401
except ImportError:
    INSTALLED_APPS.insert(0, "django_tasks")

if os.environ.get("BENCH_DB", "postgres") == "postgres":
    DATABASES = {"default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": os.environ.get("BENCH_PG_NAME", "bench_boson"),
        "USER": os.environ.get("BENCH_PG_USER", "postgres"),
        "HOST": os.environ.get("BENCH_PG_HOST", "127.0.0.1"),
        "PORT": os.environ.get("BENCH_PG_PORT", "5432"),
    }}
else:
    DATABASES = {"default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ["BENCH_SQLITE_PATH"],
        "OPTIONS": {"timeout": 20, "transaction_mode": "IMMEDIATE"},
    }}
TASKS = {"default": {"BACKEND": "boson_django.backend.BosonBackend"}}
BOSON = {"TASK_MODULES": ["bench_tasks"]}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
