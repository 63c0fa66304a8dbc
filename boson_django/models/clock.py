from __future__ import annotations

from django.db import models


class StoreClock(models.Model):
    """The one row that freezes or shifts the store clock for every process."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    frozen_at = models.DateTimeField(null=True, blank=True)
    offset_ms = models.BigIntegerField(default=0)

    class Meta:
        db_table = "boson_clock"
        verbose_name = "store clock"

    def __str__(self) -> str:
        return f"frozen at {self.frozen_at}" if self.frozen_at else f"offset {self.offset_ms} ms"
