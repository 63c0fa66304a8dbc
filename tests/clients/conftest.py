"""Real clients of the Tasks API, run as their users run them (see sites.py).

Without the client installed (``pip install -e '.[clients]'``) the tests are skipped with
the reason -- except in CI (``CI`` set), where that fails them: CI installs the extra, so a
skip there would hide a broken setup.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.ci import in_ci
from tests.clients import sites


@pytest.fixture(scope="package")
def wagtail_available() -> None:
    reason = sites.missing_wagtail()
    if reason is None:
        return
    if in_ci():
        pytest.fail(f"the Wagtail client tests cannot run in CI: {reason}", pytrace=False)
    pytest.skip(f"the Wagtail client tests need Wagtail: {reason}")


@pytest.fixture
def wagtail_sites(wagtail_available: None, tmp_path) -> Iterator[tuple[sites.Site, sites.Site]]:
    """Boson's copy and the immediate backend's copy of a stock Wagtail site, migrated, on
    the store this run uses (``BOSON_TEST_DB``); PostgreSQL databases are named after
    ``BOSON_PG_TEST_NAME`` and dropped afterwards."""
    vendor = os.environ.get("BOSON_TEST_DB", "sqlite")
    prefix = os.environ.get("BOSON_PG_TEST_NAME", "test_boson")
    made: list[sites.Site] = []
    try:
        pair = sites.wagtail_pair(tmp_path, vendor, prefix, made)
        yield pair
    finally:
        for site in made:
            sites.remove(site)
