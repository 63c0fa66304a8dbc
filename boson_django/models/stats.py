from __future__ import annotations

from django.db import models


class ThroughputMinute(models.Model):
    """Finished attempts per store-clock minute, queue, outcome and wait bucket.

    Written by one upsert in the ack's own transaction (``services.throughput``), so a job
    deleted at ack (retention 0) still counts. ``wait_bucket`` is ``floor(log2(wait_ms + 1))``
    of the attempt's wait (admitted at − due at): the dashboard's latency percentiles come
    from this histogram, with no per-job rows kept. ``shard`` (random per ack) keeps
    concurrent acks of one queue from queueing behind a single counter row.
    """

    minute = models.DateTimeField()
    queue = models.CharField(max_length=100)
    outcome = models.CharField(max_length=16)
    wait_bucket = models.PositiveSmallIntegerField(default=0)
    shard = models.PositiveSmallIntegerField(default=0, help_text="Spreads concurrent acks over rows.")
    count = models.PositiveIntegerField(default=0)

    class Meta:
        db_table = "boson_throughput_minute"
        ordering = ["-minute"]
        constraints = [
            models.UniqueConstraint(
                fields=["minute", "queue", "outcome", "wait_bucket", "shard"], name="boson_throughput_key"
            )
        ]

    def __str__(self) -> str:
        return f"{self.minute:%Y-%m-%d %H:%M} {self.queue} {self.outcome}: {self.count}"
