"""Tasks the suite enqueues; plain Django ``@task`` with boson as the backend."""

from boson_django.compat import task


@task
def noop() -> None:
    return None


@task
def add(a: int, b: int) -> int:
    return a + b


@task(max_attempts=3, rate_class="smtp", weight=2)
def send_mail(to: str) -> str:
    return f"sent to {to}"


@task(retention_ms=0)
def ephemeral() -> None:
    return None


@task(unique_key="reindex")
def rebuild_index() -> None:
    return None
