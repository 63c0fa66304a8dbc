"""The admin's history of operator actions: who did what to which row, and when.

Django's own change form writes a ``LogEntry`` for every save; boson's actions and
buttons call services instead of saving a form, so they write theirs here. The entries
show on each object's "History" page and in the admin's recent actions, like any edit.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.contenttypes.models import ContentType
from django.db import models
from django.http import HttpRequest

#: Entries written per INSERT: a bulk action over 10,000 jobs writes 10,000 of them.
BATCH = 500


def record(
    request: HttpRequest, model: type[models.Model], object_ids: Iterable[str], message: str, *, action_flag: int = CHANGE
) -> None:
    """One entry per object the operator changed (or deleted: ``DELETION``), saying how.

    Built from the ids alone, without loading the rows (a job's payload can be large):
    the entry names the object by its id.
    """
    user_id = request.user.pk
    content_type = ContentType.objects.get_for_model(model)
    LogEntry.objects.bulk_create([
        LogEntry(user_id=user_id, content_type=content_type, object_id=str(object_id),
                 object_repr=str(object_id)[:200], action_flag=action_flag, change_message=message)
        for object_id in object_ids
    ], batch_size=BATCH)
