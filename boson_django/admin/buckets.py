"""Rate-limit buckets: tuned through ``services.set_rate_limit``, deleted through
``services.delete_rate_limit`` (the class is unlimited again), tokens shown on the store clock."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import DateTimeField, Value
from django.http import HttpRequest

from boson_django import clock, services, validation
from boson_django.admin import display
from boson_django.admin.base import DeletedByService, has_perm
from boson_django.models import Bucket
from boson_django.policies import BucketState


class BucketForm(forms.ModelForm):
    """The bounds are ``services.set_rate_limit``'s: past them it raised a server error."""

    limit = forms.IntegerField(min_value=1, max_value=validation.MAX_COUNT, help_text="Tokens per window.")
    window_ms = forms.IntegerField(min_value=1, max_value=validation.MAX_MS, help_text="Window in milliseconds.")
    burst = forms.IntegerField(min_value=0, max_value=validation.MAX_COUNT, initial=0, help_text="Capacity; 0 means the limit.")

    class Meta:
        model = Bucket
        fields = ("name", "limit", "window_ms", "burst")

    def clean_name(self) -> str:
        try:
            return validation.name(self.cleaned_data["name"], "name")
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from exc


class BucketAdmin(DeletedByService):
    form = BucketForm
    list_display = ("name", "limit", "window_ms", "burst", "tokens_now")
    readonly_fields = ("tokens_now", "refilled")

    def get_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return ["name", "limit", "window_ms", "burst", "tokens_now", "refilled"] if obj else ["name", "limit", "window_ms", "burst"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return ("name", *self.readonly_fields) if obj else ()

    def get_queryset(self, request: HttpRequest) -> Any:
        return super().get_queryset(request).annotate(store_now=Value(clock.now(), output_field=DateTimeField()))

    @admin.display(description="tokens now")
    def tokens_now(self, obj: Bucket) -> str:
        state = BucketState(obj.limit, obj.window_ms, obj.burst, obj.tokens, obj.refilled_at)
        state.refill(getattr(obj, "store_now", None) or clock.now())
        return f"{state.tokens:.2f} / {obj.capacity}"

    @admin.display(description="refilled at")
    def refilled(self, obj: Bucket) -> str:
        return display.when(obj.refilled_at)

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return has_perm(request, "tune_rate_limit")

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return has_perm(request, "tune_rate_limit")

    def delete_row(self, pk: str) -> bool:
        services.delete_rate_limit(pk)
        return True  # already gone is deleted too

    def save_model(self, request: HttpRequest, obj: Bucket, form: Any, change: bool) -> None:
        data = form.cleaned_data
        saved = services.set_rate_limit(obj.name, data["limit"], data["window_ms"], data.get("burst") or 0)
        obj.__dict__.update({k: getattr(saved, k) for k in ("tokens", "refilled_at")})


admin.site.register(Bucket, BucketAdmin)
