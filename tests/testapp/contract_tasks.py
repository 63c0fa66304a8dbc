"""Tasks of tests/test_backend_contract.py (a module of the installed test app, so boson runs them)."""

from boson_django.compat import task

SEEN: list = []


@task(takes_context=True)
def records_context(context, fail_times: int = 0):
    """Records what its context says; fails its first ``fail_times`` attempts."""
    SEEN.append(
        {
            "attempt": context.attempt,
            "result_attempts": context.task_result.attempts,
            "status": context.task_result.status,
            "id": context.task_result.id,
            "args": context.task_result.args,
            "backend": context.task_result.backend,
            "worker_ids": list(context.task_result.worker_ids),
            "started_at": context.task_result.started_at,
            "last_attempted_at": context.task_result.last_attempted_at,
        }
    )
    if context.attempt <= fail_times:
        raise ValueError(f"attempt {context.attempt} fails")
    return context.attempt


@task(takes_context=True)
async def async_records_context(context, value: int):
    SEEN.append({"attempt": context.attempt, "result_attempts": context.task_result.attempts})
    return value * 2



@task
def returns_tuple() -> tuple:
    return (1, "a", [2, 3])


@task
def fails_then(n: int) -> int:
    raise RuntimeError(f"boom {n}")


@task
def order_marker(tag: str) -> str:
    SEEN.append(tag)
    return tag





RETURN_OVERRIDE: dict = {}


@task(takes_context=True)
def returns_value(context, value):
    return RETURN_OVERRIDE.get(context.task_result.id, value)
