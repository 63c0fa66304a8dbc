"""Tasks whose failures ``discard_on`` may discard (tests/worker/test_discard_on.py).

``lookup`` is what a third-party indexing task does: fetch a row by primary key, which
raises the model's ``DoesNotExist`` (a subclass of ``ObjectDoesNotExist``) once the row
was deleted before the worker ran.
"""

from django.core.exceptions import ObjectDoesNotExist

from boson_django.compat import task
from tests.testapp.models import StartMark


@task
def lookup(pk: int) -> int:
    return StartMark.objects.get(pk=pk).pk


@task
async def async_lookup(pk: int) -> int:
    return (await StartMark.objects.aget(pk=pk)).pk


@task(discard_on=(ObjectDoesNotExist,))
def lookup_discarding(pk: int) -> int:
    return StartMark.objects.get(pk=pk).pk


@task
def raises(message: str) -> None:
    raise ValueError(message)


@task(takes_context=True)
def asks_to_retry(context) -> None:
    context.retry(reason="partner busy")
