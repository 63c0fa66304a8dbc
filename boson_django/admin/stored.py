"""A job's stored JSON, read for its admin page as text first and decoded only if it can be.

Enqueue and the fenced writes refuse JSON nested deeper than ``MAX_JSON_DEPTH``, but a
row written around them (by SQL, by an older version) can hold JSON that Python's
decoder cannot read: loading the row as a model raised ``RecursionError`` in the JSON
field, and the job's page was a 500 -- the one page that should show what is wrong. Here
the JSON columns come as their stored text and are decoded the way a worker decodes
them (:func:`boson_django.services.jobrows.decoded`); what cannot be decoded is shown as
the text it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import QuerySet, TextField
from django.db.models.functions import Cast

from boson_django.models import JobData
from boson_django.services.jobrows import UNREADABLE, decoded

#: The job's JSON columns its page shows.
JOB_JSON = ("args", "kwargs", "meta", "checkpoint")


def job_rows(queryset: QuerySet) -> QuerySet:
    """``queryset`` with the JSON columns left out and their text in ``<column>_text``."""
    return queryset.defer(*JOB_JSON).annotate(**{f"{name}_text": Cast(name, TextField()) for name in JOB_JSON})


def value(text: str | None) -> Any:
    """The JSON ``text`` decoded, ``None`` for SQL NULL, or ``UNREADABLE``."""
    return None if text is None else decoded(text, UNREADABLE)


@dataclass(frozen=True)
class Written:
    """An output, result or progress row of a job: ``data`` decoded, or ``UNREADABLE``
    with ``text`` the stored JSON."""

    attempt: int
    fence: int
    at: datetime
    data: Any
    text: str | None

    @property
    def unreadable(self) -> bool:
        return self.data is UNREADABLE


def written(job_id: str, kind: str) -> Written | None:
    """The job's ``kind`` row (``JobData.Kind``), read as :func:`value` reads a column."""
    row = (JobData.objects.filter(job_id=job_id, kind=kind).defer("data")
           .annotate(data_text=Cast("data", TextField())).first())
    if row is None:
        return None
    text = row.data_text  # type: ignore[attr-defined]
    return Written(row.attempt, row.fence, row.at, value(text), text)
