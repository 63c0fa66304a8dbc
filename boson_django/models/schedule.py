from __future__ import annotations

from django.db import models

from boson_django.validation import MAX_CRON, MAX_SCHEDULE_NAME, MAX_TASK

MISSED_CHOICES = [("run_once", "Run the latest missed slot once"), ("skip", "Skip missed slots")]


class StoredSchedule(models.Model):
    """A periodic job: declared in code or settings, synced here; ``enabled`` is the admin's.

    The stored row of a :class:`boson_django.schedules.Schedule` declaration (one class per
    name: the declaration is ``Schedule``, its row ``StoredSchedule``).

    ``next_run_at`` is the next slot on the store clock; the scheduler only reads it to
    find due schedules. The guarantee of one enqueue per slot is :class:`ScheduleSlot`'s
    unique key, not this column.
    """

    name = models.CharField(primary_key=True, max_length=MAX_SCHEDULE_NAME)
    task = models.CharField(max_length=MAX_TASK)
    cron = models.CharField(max_length=MAX_CRON, blank=True, default="")
    every_ms = models.BigIntegerField(null=True, blank=True)
    timezone = models.CharField(max_length=64, default="UTC")
    missed = models.CharField(max_length=16, choices=MISSED_CHOICES, default="run_once")
    grace_ms = models.BigIntegerField(default=60_000)
    args = models.JSONField(default=list, blank=True)
    kwargs = models.JSONField(default=dict, blank=True)
    queue = models.CharField(max_length=100, null=True, blank=True)
    priority = models.SmallIntegerField(null=True, blank=True)
    source = models.CharField(max_length=16, default="code", help_text="Where it is declared: code or settings.")
    declared = models.BooleanField(default=True, help_text="False once no code or setting declares it; it never fires.")
    enabled = models.BooleanField(default=True)
    next_run_at = models.DateTimeField(null=True, blank=True)
    last_slot_at = models.DateTimeField(null=True, blank=True)
    last_run_at = models.DateTimeField(null=True, blank=True)
    last_job_id = models.CharField(max_length=64, null=True, blank=True)
    skipped_slots = models.PositiveBigIntegerField(default=0, help_text="Late slots given up (missed policy).")
    synced_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "boson_schedule"
        verbose_name = "schedule"
        verbose_name_plural = "schedules"
        ordering = ["name"]
        permissions = [("operate_schedule", "Can enable, disable and run schedules")]
        indexes = [
            models.Index(
                fields=["next_run_at"], name="boson_schedule_due",
                condition=models.Q(enabled=True, declared=True),
            )
        ]

    def __str__(self) -> str:
        return self.name


class ScheduleSlot(models.Model):
    """One fired slot. Its unique key (schedule, slot_at) is what makes a slot fire once,
    whichever worker -- current or stale scheduler -- tries."""

    schedule = models.CharField(max_length=MAX_SCHEDULE_NAME)
    slot_at = models.DateTimeField()
    job_id = models.CharField(max_length=64)
    fired_at = models.DateTimeField()
    holder = models.CharField(max_length=255, blank=True, default="")

    class Meta:
        db_table = "boson_schedule_slot"
        ordering = ["-slot_at"]
        constraints = [models.UniqueConstraint(fields=["schedule", "slot_at"], name="boson_schedule_slot_once")]

    def __str__(self) -> str:
        return f"{self.schedule} @ {self.slot_at:%Y-%m-%d %H:%M}"
