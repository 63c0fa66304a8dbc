"""Fewer index entries written per job on the worker's path.

* Closing a run writes no index entry on PostgreSQL. A run is inserted when its attempt
  is admitted and updated once when the attempt ends; that update changed ``finished_at``,
  which three indexes covered (``finished_at``, ``(task, finished_at)`` and the partial
  index of open runs), so it wrote a new entry into every index of the table. Now only
  columns fixed at insert are indexed -- ``(job, fence)``, ``started_at`` and
  ``(task, started_at)`` -- so the close can be a HOT update. It needs room for the new
  version on the same page, and every run of a page is closed at about the same time
  (one admission batch fills a few pages; one ack flush closes them), so the table
  leaves half of each page free (``fillfactor = 50``, PostgreSQL only): measured, 97%
  of closes HOT against 40% at 75, for a table about twice the size.
* ``boson_job_active`` (task, of running jobs) goes: the ``(task, state)`` index answers
  the same counts of running jobs per task, and every admission wrote an entry into both.
"""

from django.db import migrations, models

FILLFACTOR = 50


def leave_room_for_the_close(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"ALTER TABLE boson_run SET (fillfactor = {FILLFACTOR})")


def fill_pages(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("ALTER TABLE boson_run RESET (fillfactor)")


class Migration(migrations.Migration):

    dependencies = [
        ("boson_django", "0004_lean_indexes"),
    ]

    operations = [
        migrations.RemoveIndex(model_name="run", name="boson_run_finished"),
        migrations.RemoveIndex(model_name="run", name="boson_run_task"),
        migrations.RemoveIndex(model_name="run", name="boson_run_open"),
        migrations.AddIndex(model_name="run", index=models.Index(fields=["started_at"], name="boson_run_started")),
        migrations.AddIndex(
            model_name="run", index=models.Index(fields=["task", "started_at"], name="boson_run_task_started")
        ),
        migrations.RemoveIndex(model_name="job", name="boson_job_active"),
        migrations.RunPython(leave_room_for_the_close, fill_pages, elidable=True),
    ]
