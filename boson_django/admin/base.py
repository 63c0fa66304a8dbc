"""What every boson ModelAdmin shares: read-only by default, permissions by codename."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from django.contrib import admin, messages
from django.contrib.admin.models import DELETION
from django.contrib.admin.utils import model_ngettext
from django.db import connections, transaction
from django.http import HttpRequest, HttpResponse

from boson_django.admin import audit, display, lookups
from boson_django.admin.paginator import CappedPaginator

APP = "boson_django"

View = TypeVar("View", bound=Callable[..., Any])


def own_transactions(view: View) -> View:
    """Exempt an admin view from ``ATOMIC_REQUESTS`` on every database: each chunk of jobs
    a bulk action hands to a service commits by itself, as a worker's ack would. Inside the
    request's one transaction the action held every job row and rate-class bucket it had
    touched until its last job, and deadlocked with workers acking those jobs (they lock
    jobs, then buckets; the action, having locked a bucket, waited for the next job).
    A page's buttons (one job, queue or schedule) commit the same way: their service call
    is the whole change, its locks not held while the page is rendered."""
    for alias in connections:
        view = transaction.non_atomic_requests(alias)(view)
    return view


def has_perm(request: HttpRequest, codename: str) -> bool:
    return request.user.is_active and request.user.has_perm(f"{APP}.{codename}")  # type: ignore[union-attr]


class ReadOnlyAdmin(admin.ModelAdmin):
    """Rows that only services write: viewable, never added, edited or deleted by a form.

    ``view_as`` names the model whose view permission grants access (proxies of Job use
    ``job``), so one "can view job" permission opens every job list. With no delete
    permission, Django drops its ``delete_selected`` action by itself.
    """

    view_as: str | None = None
    #: Lookups the admin's own pages link to, besides its list filters' parameters (see
    #: :mod:`boson_django.admin.lookups`): no other reaches the list's query.
    linked_lookups: tuple[str, ...] = ()
    paginator = CappedPaginator
    show_full_result_count = False
    list_per_page = 50

    @own_transactions
    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> HttpResponse:
        """Where bulk actions run (see :func:`own_transactions`)."""
        return super().changelist_view(request, extra_context)

    def lookup_allowed(self, lookup: str, value: Any, request: HttpRequest | None = None) -> bool:
        """Only the declared filters' parameters: Django refuses any other with a 400."""
        return lookups.allowed(self, lookup, value, request)

    def get_list_display(self, request: HttpRequest) -> Any:
        """Time columns as the job page shows times: to the second, zone named (Django's
        list format drops the seconds and says nothing of the zone)."""
        return [display.time_column(self.model, name) for name in super().get_list_display(request)]

    def get_sortable_by(self, request: HttpRequest) -> Any:
        return [display.time_column(self.model, name) for name in super().get_sortable_by(request)]

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        model = self.view_as or self.opts.model_name
        return has_perm(request, f"view_{model}") or has_perm(request, f"change_{model}")

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class DeletedByService(ReadOnlyAdmin):
    """Rows an operator may delete, behind Django's own ``delete_<model>`` permission.

    Both the delete button and the "delete selected" action go through
    :meth:`delete_row` (a service, one short transaction per row) instead of the ORM's
    delete, so a deletion takes the locks and keeps the rules every other writer does.
    """

    def delete_row(self, pk: str) -> bool:
        """Delete one row through its service; ``False`` when the service kept it."""
        raise NotImplementedError

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return has_perm(request, f"delete_{self.opts.model_name}")

    def log_deletions(self, request: HttpRequest, queryset: Any) -> None:
        """Django logs a deletion before making it; these rows are logged once their
        service has deleted them (:meth:`_deleted`), so a row the service kept (it
        changed after the confirmation) leaves no "Deleted" entry behind."""

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        self._deleted(request, [obj.pk])

    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        self._deleted(request, list(queryset.values_list("pk", flat=True)))

    def _deleted(self, request: HttpRequest, pks: list[str]) -> None:
        """Delete through the service and say what it did: Django's own "deleted
        successfully", sent after this, would also count the rows the service kept."""
        deleted = [pk for pk in pks if self.delete_row(pk)]
        audit.record(request, self.model, deleted, "", action_flag=DELETION)
        kept = [pk for pk in pks if pk not in deleted]
        if deleted:
            super().message_user(request, f"Deleted {len(deleted)} {model_ngettext(self.opts, len(deleted))}: "
                                 f"{_listed(deleted)}", messages.SUCCESS)
        if kept:
            super().message_user(request, f"Not deleted (changed meanwhile): {_listed(kept)}", messages.WARNING)
        setattr(request, _REPORTED, True)

    def message_user(self, request: HttpRequest, message: str, level: int = messages.INFO, *args: Any, **kwargs: Any) -> None:
        if level == messages.SUCCESS and getattr(request, _REPORTED, False):
            return  # Django's success message after a deletion :meth:`_deleted` has reported
        super().message_user(request, message, level, *args, **kwargs)


#: Set on a request whose deletion :meth:`DeletedByService._deleted` has reported.
_REPORTED = "_boson_deletion_reported"


def _listed(pks: list[str], shown: int = 20) -> str:
    more = f" and {len(pks) - shown:,} more" if len(pks) > shown else ""
    return ", ".join(map(str, pks[:shown])) + more
