"""A module of tasks that queries the database at its top level, as before `migrate`
(a table that does not exist yet): the system checks import it."""

from django.db import connection

from boson_django.compat import task

with connection.cursor() as cursor:
    cursor.execute("SELECT 1 FROM boson_table_not_migrated_yet")


@task()
def never_imported() -> None:
    """Never registered: the query above fails first."""
