"""The task config and bucket change forms: bad input is a form error naming its field
and writes nothing; only users with the change permission can save them."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.admin.utils import quote
from django.urls import reverse

from boson_django import services
from boson_django.models import Bucket, TaskConfig
from tests.admin.conftest import staff_client
from tests.factories import ADD

TASK_CONFIG_FIELDS = ("max_attempts", "max_active", "rate_class", "weight", "retention_ms", "lease_ms", "timeout_ms",
                      "crash_limit", "queue", "priority", "uniqueness")
EDITOR = ["view_taskconfig", "change_taskconfig", "view_bucket", "tune_rate_limit"]


def config_row() -> tuple[Any, ...]:
    return tuple(TaskConfig.objects.filter(task=ADD).values_list(*TASK_CONFIG_FIELDS).get())


def bucket_row() -> tuple[Any, ...]:
    return tuple(Bucket.objects.filter(name="smtp").values_list("limit", "window_ms", "burst", "tokens").get())


@pytest.fixture
def editor(store_clock: Any) -> Any:
    services.set_task_config(ADD, max_attempts=4, weight=1, queue="adds")
    services.set_rate_limit("smtp", 10, 1_000, 0)
    return staff_client("editor", EDITOR)


@pytest.mark.parametrize(("field", "value"), [
    ("max_attempts", -1), ("max_attempts", 0), ("max_attempts", 2**31), ("max_attempts", "three"),
    ("max_active", 0), ("max_active", -2), ("max_active", "x"),
    ("weight", -1), ("weight", "nan"), ("weight", "inf"), ("weight", "1e400"), ("weight", "heavy"),
    ("retention_ms", -1), ("retention_ms", 10**17), ("retention_ms", "1h"),
    ("lease_ms", 0), ("lease_ms", 10**17), ("timeout_ms", 0), ("timeout_ms", -5),
    ("crash_limit", 0), ("crash_limit", 2**31),
    ("priority", 101), ("priority", -101), ("priority", "high"),
    ("rate_class", "smtp\x1b[31m"), ("queue", "q" * 101), ("uniqueness", "sometimes"),
])
def test_a_bad_task_config_value_is_a_form_error_naming_its_field_and_saves_nothing(editor, field, value):
    before = config_row()
    data = {"max_active": 6, "priority": 1, field: value}  # beside valid edits, which must not land either
    response = editor.post(reverse("admin:boson_django_taskconfig_change", args=[quote(ADD)]), data)
    assert response.status_code == 200
    assert list(response.context["adminform"].form.errors) == [field]
    assert config_row() == before


@pytest.mark.parametrize(("field", "value"), [
    ("limit", 0), ("limit", -1), ("limit", "ten"), ("limit", 2**31),
    ("window_ms", 0), ("window_ms", "1s"), ("window_ms", 10**15),
    ("burst", -1), ("burst", "x"), ("burst", 2**31),
])
def test_a_bad_bucket_value_is_a_form_error_naming_its_field_and_saves_nothing(editor, field, value):
    before = bucket_row()
    data = {"limit": 5, "window_ms": 2_000, "burst": 8, field: value}
    response = editor.post(reverse("admin:boson_django_bucket_change", args=["smtp"]), data)
    assert response.status_code == 200
    assert list(response.context["adminform"].form.errors) == [field]
    assert bucket_row() == before


def test_each_form_saves_only_for_users_with_its_change_permission(editor):
    config_url = reverse("admin:boson_django_taskconfig_change", args=[quote(ADD)])
    bucket_url = reverse("admin:boson_django_bucket_change", args=["smtp"])
    configs_only = staff_client("configs", ["view_taskconfig", "change_taskconfig", "view_bucket"])
    buckets_only = staff_client("buckets", ["view_taskconfig", "view_bucket", "tune_rate_limit"])
    config, bucket = config_row(), bucket_row()
    assert configs_only.post(bucket_url, {"limit": 1, "window_ms": 1, "burst": 0}).status_code == 403
    assert buckets_only.post(config_url, {"max_attempts": 9}).status_code == 403
    assert (config_row(), bucket_row()) == (config, bucket)
    assert configs_only.post(config_url, {"max_attempts": 9}).status_code == 302
    assert buckets_only.post(bucket_url, {"limit": 1, "window_ms": 1, "burst": 0}).status_code == 302
    assert TaskConfig.objects.get(task=ADD).max_attempts == 9
    assert Bucket.objects.get(name="smtp").limit == 1
