from __future__ import annotations

import pytest

from boson_django.schedules import scheduler, sync_schedules
from tests.schedules.support import SIM_SCHEDULES


@pytest.fixture(autouse=True)
def _fresh_sync():
    """Each test syncs its own declarations (the per-process 'synced' mark is reset)."""
    scheduler.forget_sync()
    yield
    scheduler.forget_sync()


@pytest.fixture
def schedules_in_settings(settings):
    """``BOSON["SCHEDULES"]`` holding the simulation's schedules."""
    settings.BOSON = {**settings.BOSON, "SCHEDULES": SIM_SCHEDULES}
    return SIM_SCHEDULES


@pytest.fixture
def synced(schedules_in_settings, live_clock):
    sync_schedules()
    return live_clock
