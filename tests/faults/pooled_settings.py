"""Settings of worker and client subprocesses connected through PgBouncer
(tests/faults/pgbouncer.py): the fault settings, with ``BOSON_PG_PORT`` the pooler's port
and ``BOSON_TEST_POOLER`` its mode. Transaction pooling gets the configuration
docs/workers.md gives for it; session pooling keeps LISTEN/NOTIFY on."""

import os
from datetime import timedelta

from tests.faults.settings import *  # noqa: F401,F403
from tests.faults.settings import BOSON as _FAULT_BOSON
from tests.faults.settings import DATABASES

_POOLER = os.environ.get("BOSON_TEST_POOLER") or None
BOSON = {**_FAULT_BOSON, "POOLER": _POOLER}
if _POOLER == "transaction":
    BOSON["NOTIFY"] = os.environ.get("BOSON_TEST_NOTIFY") == "1"  # False, as docs/workers.md says
    DATABASES["default"]["DISABLE_SERVER_SIDE_CURSORS"] = True
if os.environ.get("BOSON_TEST_SLEEPY") == "1":  # only a NOTIFY wakes an idle worker within a minute
    BOSON.update(POLL_INTERVAL_MS=600_000, SWEEP_INTERVAL_MS=60_000)
if os.environ.get("BOSON_TEST_SCHEDULE") == "1":
    BOSON["SCHEDULES"] = {"pooled-minute": {"task": "tests.testapp.tasks.noop", "every": timedelta(minutes=1)}}
