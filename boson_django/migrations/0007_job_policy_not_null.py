"""Every job has a lease length and a crash limit.

Every enqueue writes ``boson_job.lease_ms`` and ``crash_limit`` (given, else the task's
TaskConfig, its ``@task`` default, then ``BOSON``), but both columns allowed NULL, and a
row written some other way without them was mishandled: claimed with no lease expiry
(on PostgreSQL it stayed ``running`` with a lease no reclaim finds; on SQLite it failed
every admission that picked it), and quarantined at its first lost lease. Rows still
without one take their task's TaskConfig value, else the ``BOSON`` setting as the
migration runs; then the columns refuse NULL.
"""

from django.db import migrations, models, router
from django.db.models import F, OuterRef, Q, Subquery, Value
from django.db.models.functions import Coalesce

#: Each column filled, and the setting a row takes when its task's TaskConfig has no value.
FILLED = {"lease_ms": "LEASE_MS", "crash_limit": "CRASH_LIMIT"}


def fill_policies(apps, schema_editor):
    """One UPDATE of the rows missing either value: a value a row has stays, a missing one
    takes the task's TaskConfig value (a primary-key lookup), else the setting."""
    from boson_django import conf

    job = apps.get_model("boson_django", "Job")
    alias = schema_editor.connection.alias
    if not router.allow_migrate_model(alias, job):
        return
    configs = apps.get_model("boson_django", "TaskConfig").objects.using(alias)
    fills = {}
    for column, setting in FILLED.items():
        configured = configs.filter(task=OuterRef("task"), **{f"{column}__isnull": False}).values(column)[:1]
        fills[column] = Coalesce(F(column), Subquery(configured), Value(getattr(conf.get(), setting)))
    missing = Q(lease_ms__isnull=True) | Q(crash_limit__isnull=True)
    job.objects.using(alias).filter(missing).update(**fills)


class Migration(migrations.Migration):

    dependencies = [
        ("boson_django", "0006_task_config_uniqueness"),
    ]

    operations = [
        migrations.RunPython(fill_policies, migrations.RunPython.noop),
        migrations.AlterField(model_name="job", name="lease_ms", field=models.BigIntegerField()),
        migrations.AlterField(model_name="job", name="crash_limit", field=models.PositiveIntegerField()),
    ]
