"""Every system check id boson reports is documented once in the settings reference,
which scripts/gen_docs.py writes."""

from __future__ import annotations

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
ID = re.compile(r'id="boson\.([EW]\d{3})"')
MENTION = re.compile(r"`boson\.([EW]\d{3})`(?:-`([EW]\d{3})`)?")


def _reported() -> set[str]:
    return {found for path in (ROOT / "boson_django").rglob("*.py") for found in ID.findall(path.read_text())}


def _documented() -> set[str]:
    found = set()
    for first, last in MENTION.findall((ROOT / "docs" / "settings.md").read_text()):
        kind, start, end = first[0], int(first[1:]), int((last or first)[1:])
        found.update(f"{kind}{n:03d}" for n in range(start, end + 1))
    return found


def test_every_check_id_is_in_the_settings_reference():
    assert _reported() - _documented() == set()


def test_the_settings_reference_names_no_check_that_is_not_reported():
    assert _documented() - _reported() == set()
