"""An index of every job's unique key, for the admin's search by key.

The unique constraint ``boson_job_unique_key_live`` indexes the keys of live jobs only;
a job that failed or completed is found by its key through this one. Partial: a job
without a key writes no entry, so a queue that uses no keys pays nothing for it.
"""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("boson_django", "0008_task_config_discard_on"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="job",
            index=models.Index(condition=models.Q(("unique_key__isnull", False)), fields=["unique_key"], name="boson_job_key"),
        ),
    ]
