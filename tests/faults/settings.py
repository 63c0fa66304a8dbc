"""Settings of the fault suite's worker subprocesses: the test settings plus the fault tasks,
and any ``BOSON`` keys a scenario passes as JSON in ``BOSON_FAULT_SETTINGS``."""

import json
import os

from tests.settings import *  # noqa: F401,F403
from tests.settings import BOSON as _BOSON

BOSON = {
    **_BOSON,
    "TASK_MODULES": [*_BOSON.get("TASK_MODULES", []), "tests.testapp.fault_tasks"],
    **json.loads(os.environ.get("BOSON_FAULT_SETTINGS") or "{}"),
}
