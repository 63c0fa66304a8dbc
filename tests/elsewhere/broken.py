"""A module of tasks that raises while it is imported (a missing setting, say). Each
import appends a line to the file ``BOSON_TEST_IMPORT_MARKER`` names, when it is set."""

import os

if os.environ.get("BOSON_TEST_IMPORT_MARKER"):
    with open(os.environ["BOSON_TEST_IMPORT_MARKER"], "a") as marker:
        marker.write("broken\n")

raise RuntimeError("this module refuses to import")
