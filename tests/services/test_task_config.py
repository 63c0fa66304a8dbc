"""Task configs: written, warned about when their task is not registered, removed."""

from __future__ import annotations

import warnings

import pytest

from boson_django import services
from boson_django.errors import UnregisteredTaskWarning
from boson_django.models import TaskConfig
from tests.factories import ADD


def test_a_config_for_an_unregistered_task_is_written_with_a_warning_naming_the_closest_task(db):
    with pytest.warns(UnregisteredTaskWarning, match="'tests.testapp.tasks.ad'") as caught:
        services.set_task_config("tests.testapp.tasks.ad", max_active=2)
    (warning,) = caught
    assert f"Did you mean {ADD!r}?" in str(warning.message)
    assert warning.filename == __file__  # points at the caller, not at boson's own code
    assert TaskConfig.objects.get(task="tests.testapp.tasks.ad").max_active == 2


def test_a_config_for_a_name_like_no_task_warns_without_a_suggestion(db):
    with pytest.warns(UnregisteredTaskWarning) as caught:
        services.set_task_config("billing.tasks.charge_card", max_active=2)
    assert "Did you mean" not in str(caught[0].message)


def test_a_config_for_a_registered_task_does_not_warn(db):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        services.set_task_config(ADD, max_active=2)
