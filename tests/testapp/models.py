"""Rows the fault suite's tasks write, so a checker can prove what ran and what took effect.

``StartMark``: one row each time a handler starts (autocommitted at once, so a killed
worker leaves it behind). ``Effect``: the job's effect, written through
``context.in_ack`` in the same transaction as the fenced SUCCESS ack -- the unique
constraint is deliberately absent, so a double effect would show up as two rows.
"""

from django.db import models


class StartMark(models.Model):
    job_id = models.CharField(max_length=64, db_index=True)
    fence = models.BigIntegerField()
    pid = models.IntegerField()
    at = models.DateTimeField()  # store clock

    class Meta:
        app_label = "testapp"


class Effect(models.Model):
    job_id = models.CharField(max_length=64, db_index=True)
    fence = models.BigIntegerField()
    at = models.DateTimeField()  # store clock, inside the ack's transaction

    class Meta:
        app_label = "testapp"
