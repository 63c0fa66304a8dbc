"""A module declaring a cron schedule: it imports only where cronsim is installed
(``tests/test_settings_checks.py`` imports it with cronsim hidden)."""

from boson_django.compat import task


@task(schedule="0 3 * * *")
def nightly() -> None:
    pass
