"""A module that records being imported (a line in the file ``BOSON_TEST_IMPORT_MARKER``
names): the strict setting must never import it."""

import os

from boson_django.compat import task

if os.environ.get("BOSON_TEST_IMPORT_MARKER"):
    with open(os.environ["BOSON_TEST_IMPORT_MARKER"], "a") as marker:
        marker.write("untouched\n")


@task
def hello() -> str:
    return "hello"
