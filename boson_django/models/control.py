from __future__ import annotations

from django.db import models

from boson_django.validation import UNIQUENESS


class Queue(models.Model):
    """A named queue of jobs; created on first enqueue, paused and resumed by operators."""

    name = models.CharField(primary_key=True, max_length=100)
    paused = models.BooleanField(default=False)
    paused_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "boson_queue"
        ordering = ["name"]
        permissions = [("operate_queue", "Can pause and resume queues")]

    def __str__(self) -> str:
        return self.name


class Bucket(models.Model):
    """The token bucket of a rate class: ``limit`` tokens per ``window_ms``, up to ``burst``."""

    name = models.CharField(primary_key=True, max_length=100)
    limit = models.PositiveIntegerField()
    window_ms = models.PositiveBigIntegerField()
    burst = models.PositiveIntegerField(default=0, help_text="Capacity; 0 means the limit.")
    tokens = models.FloatField()
    refilled_at = models.DateTimeField()

    class Meta:
        db_table = "boson_bucket"
        ordering = ["name"]
        permissions = [("tune_rate_limit", "Can tune rate limits")]

    @property
    def capacity(self) -> int:
        return self.burst or self.limit

    def __str__(self) -> str:
        return f"{self.name}: {self.limit}/{self.window_ms}ms"


class Duty(models.Model):
    """A singleton lease on a named chore, so one node runs it per tick."""

    name = models.CharField(primary_key=True, max_length=100)
    holder = models.CharField(max_length=255)
    expires_at = models.DateTimeField()
    claimed_at = models.DateTimeField()

    class Meta:
        db_table = "boson_duty"
        ordering = ["name"]
        verbose_name_plural = "duties"

    def __str__(self) -> str:
        return f"{self.name} held by {self.holder}"


class TaskConfig(models.Model):
    """Per-task policy from the admin; a set field overrides the task's code defaults."""

    task = models.CharField(primary_key=True, max_length=255)
    max_attempts = models.PositiveIntegerField(null=True, blank=True)
    max_active = models.PositiveIntegerField(null=True, blank=True)
    rate_class = models.CharField(max_length=100, null=True, blank=True)
    weight = models.FloatField(null=True, blank=True)
    retention_ms = models.BigIntegerField(null=True, blank=True)
    lease_ms = models.BigIntegerField(null=True, blank=True)
    timeout_ms = models.BigIntegerField(null=True, blank=True)
    crash_limit = models.PositiveIntegerField(null=True, blank=True)
    queue = models.CharField(max_length=100, null=True, blank=True)
    priority = models.SmallIntegerField(null=True, blank=True)
    uniqueness = models.CharField(
        max_length=16, null=True, blank=True, choices=[(value, value) for value in UNIQUENESS],
        help_text="Empty: as the task's code says (its unique_key, if any). off: no job of the task gets a "
                  "unique key, so every enqueue creates one. arguments: a job without a key of its own is "
                  "unique by task and arguments (its fingerprint).",
    )
    discard_on = models.TextField(
        null=True, blank=True,
        help_text="Exception classes, by dotted path, one per line (e.g. django.core.exceptions.ObjectDoesNotExist). "
                  "When the task's handler raises one of them, or a subclass, the job fails at once instead of being "
                  "retried. Empty: BOSON['TASK_POLICIES'], then the task's code, decide. Read when a handler raises, "
                  "so a change applies to jobs already queued.",
    )

    class Meta:
        db_table = "boson_task_config"
        ordering = ["task"]
        verbose_name = "task config"

    def __str__(self) -> str:
        return self.task


class QuarantinedFingerprint(models.Model):
    """A fingerprint that crashed workers ``crash_limit`` times; its enqueues are quarantined."""

    fingerprint = models.CharField(primary_key=True, max_length=64)
    task = models.CharField(max_length=255)
    job_id = models.CharField(max_length=64, help_text="The job that reached the crash limit.")
    reason = models.TextField(blank=True, default="")
    quarantined_at = models.DateTimeField()

    class Meta:
        db_table = "boson_quarantined_fingerprint"
        ordering = ["-quarantined_at"]

    def __str__(self) -> str:
        return f"{self.task} {self.fingerprint[:12]}"
