"""Fewer indexes on the hot tables: every job and run row pays for each one on every write.

* ``boson_run.job_id`` and ``boson_job_data.job_id`` lose their own indexes: the
  ``(job, fence)`` index and the unique ``(job, kind)`` constraint lead with the same
  column and serve every lookup by job.
* On PostgreSQL, the ``varchar_pattern_ops`` twin Django adds beside a text primary key
  (``boson_job_id_..._like``) goes: job ids are only ever compared whole.
"""

import django.db.models.deletion
from django.db import migrations, models


def _job_id_like_index(schema_editor):
    return schema_editor._create_index_name("boson_job", ["id"], suffix="_like")


def drop_job_id_like(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"DROP INDEX IF EXISTS {schema_editor.quote_name(_job_id_like_index(schema_editor))}")


def restore_job_id_like(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        name = schema_editor.quote_name(_job_id_like_index(schema_editor))
        schema_editor.execute(f"CREATE INDEX IF NOT EXISTS {name} ON boson_job (id varchar_pattern_ops)")


class Migration(migrations.Migration):

    dependencies = [
        ("boson_django", "0003_schedules"),
    ]

    operations = [
        migrations.AlterField(
            model_name="jobdata",
            name="job",
            field=models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.CASCADE,
                                    related_name="data", to="boson_django.job"),
        ),
        migrations.AlterField(
            model_name="run",
            name="job",
            field=models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.CASCADE,
                                    related_name="runs", to="boson_django.job"),
        ),
        migrations.RunPython(drop_job_id_like, restore_job_id_like, elidable=True),
    ]
