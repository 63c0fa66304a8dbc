"""Real clients of the Tasks API, run as their users run them (see sites.py).

Without a client installed (``pip install -e '.[clients]'``) its tests are skipped with
the reason -- except in CI (``CI`` set), where that fails them: CI installs the extra, so a
skip there would hide a broken setup.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import pytest

from tests.ci import in_ci
from tests.clients import sites


def require(distribution: str) -> None:
    reason = sites.missing(distribution)
    if reason is None:
        return
    if in_ci():
        pytest.fail(f"the {distribution} client tests cannot run in CI: {reason}", pytrace=False)
    pytest.skip(f"the {distribution} client tests need it: {reason}")


def site_pair(make: Callable, name: str, tmp_path) -> Iterator[tuple[sites.Site, sites.Site]]:
    """Boson's copy and the immediate backend's copy of a site, migrated, on the store this
    run uses (``BOSON_TEST_DB``); PostgreSQL databases are named after
    ``BOSON_PG_TEST_NAME`` (tests/databases.py) and dropped afterwards."""
    vendor = os.environ.get("BOSON_TEST_DB", "sqlite")
    made: list[sites.Site] = []
    try:
        yield sites.pair(make, name, tmp_path, vendor, made)
    finally:
        for site in made:
            sites.remove(site)


@pytest.fixture
def wagtail_sites(tmp_path) -> Iterator[tuple[sites.Site, sites.Site]]:
    """Two copies of a stock Wagtail site (``wagtail start``)."""
    require("wagtail")
    yield from site_pair(sites.wagtail_site, "wagtail", tmp_path)


@pytest.fixture
def pictures_sites(tmp_path) -> Iterator[tuple[sites.Site, sites.Site]]:
    """Two copies of a ``startproject`` site using django-pictures. It enqueues through
    ``django.tasks`` only on Django 6 (on 5.2 it offers its Celery, Dramatiq and RQ
    processors instead), so on Django 5.2 there is nothing to run: skipped, in CI too."""
    if sites.tasks_module() != "django.tasks":
        pytest.skip("django-pictures enqueues through django.tasks only on Django 6")
    require("django-pictures")
    yield from site_pair(sites.pictures_site, "pictures", tmp_path)
