from __future__ import annotations

from django.db import models

from boson_django.models.job import Job


class Run(models.Model):
    """One attempt at a job: who ran it, when, how it ended, its error and log lines.

    Every admission opens a run. ``recorded`` marks the runs that count as attempt
    records (``services.errors()``): snoozes, rate-limited acks and successes without
    logs close their run without recording it.
    """

    # No index of its own: boson_run_job_fence (job, fence) serves every lookup by job.
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="runs", db_constraint=False, db_index=False)
    task = models.CharField(max_length=255)
    queue = models.CharField(max_length=100)
    attempt = models.PositiveIntegerField(help_text="1-based number of the attempt this run is.")
    fence = models.BigIntegerField()
    worker_id = models.CharField(max_length=255, blank=True, default="")
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(max_length=16, blank=True, default="")
    error = models.TextField(blank=True, default="")
    logs = models.JSONField(default=list, blank=True)
    recorded = models.BooleanField(default=False)

    # Only columns fixed when the run opens are indexed, so closing it (finished_at,
    # outcome, error, logs, recorded) is a HOT update on PostgreSQL: no index entry is
    # written, and the table keeps room on each page for it (fillfactor, migration 0005).
    class Meta:
        db_table = "boson_run"
        ordering = ["-started_at", "-id"]
        indexes = [
            models.Index(fields=["job", "fence"], name="boson_run_job_fence"),
            models.Index(fields=["started_at"], name="boson_run_started"),
            models.Index(fields=["task", "started_at"], name="boson_run_task_started"),
        ]

    def __str__(self) -> str:
        return f"{self.task} [{self.job_id}] #{self.attempt} {self.outcome or 'open'}"


class JobData(models.Model):
    """Fenced side data of a job (result, output, progress), read only on request."""

    class Kind(models.TextChoices):
        RESULT = "result"
        OUTPUT = "output"
        PROGRESS = "progress"

    # No index of its own: the unique (job, kind) constraint serves every lookup by job.
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="data", db_constraint=False, db_index=False)
    kind = models.CharField(max_length=8, choices=Kind.choices)
    attempt = models.PositiveIntegerField()
    fence = models.BigIntegerField()
    at = models.DateTimeField()
    data = models.JSONField(null=True)

    class Meta:
        db_table = "boson_job_data"
        constraints = [models.UniqueConstraint(fields=["job", "kind"], name="boson_job_data_kind")]

    def __str__(self) -> str:
        return f"{self.kind} of {self.job_id}"
