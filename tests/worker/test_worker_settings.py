"""The worker's BOSON settings are validated at start-up like the others."""

from __future__ import annotations

import pytest
from django.test import override_settings

from boson_django import checks, conf


def errors_for(**boson):
    with override_settings(BOSON=boson):
        return [m.msg for m in checks.check_settings()]


def test_worker_settings_have_documented_defaults():
    for key in ("CONCURRENCY", "HEARTBEAT_MS", "SWEEP_INTERVAL_MS", "SWEEP_BATCH", "SHUTDOWN_GRACE_MS",
                "NOTIFY", "NOTIFY_CHANNEL", "RECONNECT_MAX_MS", "LOG_CAPTURE_LEVEL", "EMBEDDED_WORKER"):
        assert key in conf.DEFAULTS and conf.DOCS[key] and key in conf.RULES


@pytest.mark.parametrize(
    ("boson", "fragment"),
    [
        ({"NOTIFY": "yes"}, "BOSON['NOTIFY'] must be bool"),
        ({"EMBEDDED_WORKER": 1}, "BOSON['EMBEDDED_WORKER'] must be bool"),
        ({"CONCURRENCY": 0}, "BOSON['CONCURRENCY'] must be >= 1"),
        ({"HEARTBEAT_MS": True}, "BOSON['HEARTBEAT_MS'] must be int"),
        ({"NOTIFY_CHANNEL": "boson; drop"}, "BOSON['NOTIFY_CHANNEL'] must be a plain identifier"),
    ],
)
def test_bad_worker_settings_are_reported(boson, fragment):
    assert any(fragment in msg for msg in errors_for(**boson))


def test_good_worker_settings_pass():
    assert errors_for(NOTIFY=False, EMBEDDED_WORKER=False, CONCURRENCY=4, NOTIFY_CHANNEL="jobs_wake") == []
