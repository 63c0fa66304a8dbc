"""Tasks that declare their schedules in code (imported by the tests that need them)."""

from datetime import timedelta

from boson_django.compat import task
from boson_django.schedules import Schedule


@task(schedule="0 3 * * *")
def nightly() -> None:
    return None


@task(schedule=[
    Schedule(cron="*/15 * * * *", timezone="Europe/Paris", name="tests-report-eu", args=["eu"], missed="skip"),
    Schedule(every=timedelta(minutes=10), name="tests-report-us", args=["us"], queue="reports"),
])
def report(region: str) -> str:
    return region
