"""Queue controls: pause, resume, and deleting an idle queue's row."""

from __future__ import annotations

from boson_django import clock, validation
from boson_django.models import Job, Queue
from boson_django import database
from boson_django.services import wakeups


@database.store_transaction
def pause_queue(name: str, *, using: str | None = None) -> bool:
    """Stop admitting from this queue (running jobs go on). ``True`` if this call paused
    it, ``False`` if it was paused already. Idempotent.

    Locks the queue's row. Pausing a paused queue changes nothing: ``paused_at`` keeps
    the first pause, so an operator sees how long the queue has been held, not when
    someone last pressed Pause.
    """
    validation.name(name, "name")
    now = clock.now(using)
    queue, created = Queue.objects.using(using).select_for_update().get_or_create(
        name=name, defaults={"paused": True, "paused_at": now}
    )
    if created:
        return True
    if queue.paused:
        return False
    queue.paused, queue.paused_at = True, now
    queue.save(using=using, update_fields=["paused", "paused_at"])
    return True


@database.store_transaction
def resume_queue(name: str, *, using: str | None = None) -> bool:
    """Admit from this queue again, and wake idle workers for its waiting jobs. ``True``
    if this call resumed it, ``False`` if it was not paused. Idempotent."""
    validation.name(name, "name")
    resumed = Queue.objects.using(using).filter(name=name, paused=True).update(paused=False, paused_at=None)
    if not resumed:
        Queue.objects.using(using).get_or_create(name=name)
        return False
    wakeups.notify_at_commit([name], using)
    return True


def reason_to_keep_queue(name: str, *, using: str | None = None) -> str | None:
    """Why the queue's row may not be deleted now, or None when it may (read only).

    The row holds the queue's pause, and the admin's lists and the dashboard find a
    queue's jobs through it: a paused queue keeps its row (deleting it would resume the
    queue for the next job enqueued to it), and so does one that any job, in any state,
    still names.
    """
    db = database.alias(using)
    paused = Queue.objects.using(db).filter(name=name).values_list("paused", flat=True).first()
    if paused is None:
        return "no such queue"
    if paused:
        return "it is paused (resume it first)"
    if Job.objects.using(db).filter(queue=name).exists():
        return "jobs are still in it"
    return None


@database.store_transaction
def delete_queue(name: str, *, using: str | None = None) -> bool:
    """Delete an idle queue's row: one that is not paused and that no job names. ``False``,
    and nothing changed, for any other (see :func:`reason_to_keep_queue`). Idempotent.

    Locks the queue's row, so a pause or resume in flight finishes first. The next job
    enqueued to the name creates the row again, unpaused. On PostgreSQL a job whose
    enqueue commits while the row is being deleted can end up in a queue with no row
    until the next enqueue to it; it is admitted all the same (only a paused row holds
    jobs back).
    """
    validation.name(name, "name")
    if not Queue.objects.using(using).select_for_update().filter(name=name).exists():
        return False
    if reason_to_keep_queue(name, using=using) is not None:
        return False
    Queue.objects.using(using).filter(name=name).delete()
    return True
