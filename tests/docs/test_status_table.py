"""The status table docs/tasks.md documents (SPEC section 6) is the mapping the code uses."""

from __future__ import annotations

import pathlib
import re

from boson_django import taskresults
from boson_django.states import JobState

PAGE = pathlib.Path(__file__).resolve().parents[2] / "docs" / "tasks.md"
ROW = re.compile(r"^\| ([a-z, ]+) \| `(READY|RUNNING|SUCCESSFUL|FAILED)` \|$", re.M)


def _documented() -> dict[str, str]:
    found = {}
    for states, status in ROW.findall(PAGE.read_text()):
        found.update({state.strip(): status for state in states.split(",")})
    return found


def test_documented_table_is_the_code_mapping_for_every_state():
    assert _documented() == {state.value: status.value for state, status in taskresults.STATUS.items()}
    assert set(taskresults.STATUS) == set(JobState)
