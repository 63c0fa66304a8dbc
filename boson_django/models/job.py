from __future__ import annotations

from collections.abc import Iterable

from django.db import models
from django.db.models import Q

from boson_django.states import PENDING, TERMINAL, UNIQUE_HOLDING, JobState

STATE_CHOICES = [(s.value, s.value.capitalize()) for s in JobState]


def _in(states: Iterable[JobState]) -> list[str]:
    return sorted(s.value for s in states)


class JobQuerySet(models.QuerySet["Job"]):
    def without_payload(self) -> JobQuerySet:
        return self.defer("args", "kwargs", "meta", "checkpoint")


class Job(models.Model):
    """The envelope, its policy and its lifecycle state: one row per job."""

    id = models.CharField(primary_key=True, max_length=64)
    task = models.CharField(max_length=255, db_index=False)
    queue = models.CharField(max_length=100, default="default")
    state = models.CharField(max_length=16, choices=STATE_CHOICES)
    priority = models.SmallIntegerField(default=0)
    args = models.JSONField(default=list)
    kwargs = models.JSONField(default=dict)
    meta = models.JSONField(default=dict, blank=True)
    unique_key = models.CharField(max_length=255, null=True, blank=True)
    fingerprint = models.CharField(max_length=64)
    weight = models.FloatField(default=1.0)
    rate_class = models.CharField(max_length=100, null=True, blank=True)
    max_attempts = models.PositiveIntegerField()
    retention_ms = models.BigIntegerField(null=True, blank=True)
    lease_ms = models.BigIntegerField()
    timeout_ms = models.BigIntegerField(null=True, blank=True)
    crash_limit = models.PositiveIntegerField()

    attempt = models.PositiveIntegerField(default=0)
    crash_attempt = models.PositiveIntegerField(default=0)
    fence = models.BigIntegerField(default=0)
    lease_holder = models.CharField(max_length=255, null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    charged_weight = models.FloatField(default=0.0)
    checkpoint = models.JSONField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")

    run_at = models.DateTimeField()
    enqueued_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True)
    attempted_at = models.DateTimeField(null=True, blank=True)
    finalized_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)

    objects = JobQuerySet.as_manager()

    class Meta:
        db_table = "boson_job"
        ordering = ["-priority", "run_at", "id"]
        permissions = [
            ("operate_job", "Can retry and cancel jobs"),
            ("release_quarantine", "Can release quarantined jobs"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["unique_key"],
                condition=Q(unique_key__isnull=False, state__in=_in(UNIQUE_HOLDING)),
                name="boson_job_unique_key_live",
            ),
            models.CheckConstraint(
                condition=Q(priority__gte=-100, priority__lte=100),
                name="boson_job_priority_range",
            ),
            models.CheckConstraint(condition=Q(weight__gte=0), name="boson_job_weight_nonneg"),
        ]
        indexes = [
            models.Index(
                "queue", models.F("priority").desc(), "run_at", "id",
                condition=Q(state="available"), name="boson_job_claim_q",
            ),
            models.Index(
                models.F("priority").desc(), "run_at", "id",
                condition=Q(state="available"), name="boson_job_claim",
            ),
            models.Index(
                fields=["run_at"], condition=Q(state__in=_in(PENDING)), name="boson_job_due"
            ),
            models.Index(
                fields=["lease_expires_at"], condition=Q(state="running"), name="boson_job_lease"
            ),
            models.Index(
                fields=["expires_at"], condition=Q(state__in=_in(TERMINAL)), name="boson_job_evict"
            ),
            models.Index(
                fields=["fingerprint"], condition=Q(state="quarantined"), name="boson_job_quar"
            ),
            models.Index(
                fields=["queue", "run_at"], condition=Q(state="available"), name="boson_job_wait"
            ),
            models.Index(fields=["queue", "state"], name="boson_job_queue_state"),
            models.Index(fields=["task", "state"], name="boson_job_task_state"),
            # The admin's search by unique key, in every state (the constraint above
            # holds the live ones only); jobs without a key write no entry.
            models.Index(fields=["unique_key"], condition=Q(unique_key__isnull=False), name="boson_job_key"),
        ]

    def __str__(self) -> str:
        return f"{self.task} [{self.id}] {self.state}"


class LeaseManager(models.Manager["Job"]):
    def get_queryset(self) -> JobQuerySet:
        return JobQuerySet(self.model, using=self._db).filter(state=JobState.RUNNING.value)


class Lease(Job):
    """A live claim: a running job seen through its lease columns.

    Leases live on the job row (not a table of their own) so that a claim, a renewal and
    every fenced write touch exactly one row; see docs/design.md.
    """

    objects = LeaseManager()

    class Meta:
        proxy = True
        verbose_name = "lease"
        ordering = ["lease_expires_at"]
