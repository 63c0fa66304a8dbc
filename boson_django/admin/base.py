"""What every boson ModelAdmin shares: read-only by default, permissions by codename."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from boson_django.admin.paginator import CappedPaginator

APP = "boson_django"


def has_perm(request: HttpRequest, codename: str) -> bool:
    return request.user.is_active and request.user.has_perm(f"{APP}.{codename}")  # type: ignore[union-attr]


class ReadOnlyAdmin(admin.ModelAdmin):
    """Rows that only services write: viewable, never added, edited or deleted by a form.

    ``view_as`` names the model whose view permission grants access (proxies of Job use
    ``job``), so one "can view job" permission opens every job list. With no delete
    permission, Django drops its ``delete_selected`` action by itself.
    """

    view_as: str | None = None
    paginator = CappedPaginator
    show_full_result_count = False
    list_per_page = 50

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        model = self.view_as or self.opts.model_name
        return has_perm(request, f"view_{model}") or has_perm(request, f"change_{model}")

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
