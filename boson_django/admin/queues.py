"""Queues: pause, resume and delete (an idle queue only), through the services."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponseRedirect
from django.urls import path, reverse
from django.views.decorators.http import require_POST

from boson_django import services
from boson_django.admin import audit, display
from boson_django.admin.base import DeletedByService, has_perm, own_transactions
from boson_django.models import Queue


class QueueAdmin(DeletedByService):
    list_display = ("name", "status", "paused_at", "jobs")
    actions = ("pause_selected", "resume_selected")
    fields = ("name", "status", "paused_since", "jobs")
    readonly_fields = ("status", "paused_since", "jobs")
    change_form_template = "admin/boson_django/queue/change_form.html"

    @admin.display(description="status", ordering="paused")
    def status(self, obj: Queue) -> str:
        return display.badge("paused", "#c58b00") if obj.paused else display.badge("active", "#3b9a5b")

    @admin.display(description="paused at")
    def paused_since(self, obj: Queue) -> str:
        return display.when(obj.paused_at)

    @admin.display(description="jobs")
    def jobs(self, obj: Queue) -> str:
        from django.utils.html import format_html

        return format_html('<a href="{}">jobs in this queue</a>', display.changelist_url("job", queue=obj.name))

    def delete_row(self, pk: str) -> bool:
        return services.delete_queue(pk)

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> tuple[Any, Any, Any, list[str]]:
        """Django's confirmation page, with each queue the service would keep listed as
        protected (which stops the deletion there and says why)."""
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        for queue in objs:
            reason = services.reason_to_keep_queue(queue.name)
            if reason is not None:
                protected = [*protected, f"Queue {queue.name}: kept, {reason}"]
        return deleted, counts, perms_needed, protected

    def has_operate_queue_permission(self, request: HttpRequest) -> bool:
        return has_perm(request, "operate_queue")

    def _each(self, request: HttpRequest, queryset: Any, service: Any, verb: str) -> None:
        names = list(queryset.values_list("name", flat=True))
        changed = [name for name in names if service(name)]
        audit.record(request, Queue, changed, verb.capitalize())
        unchanged = len(names) - len(changed)
        self.message_user(request, f"{len(changed)} {verb}" + (f", {unchanged} already {verb}" if unchanged else ""),
                          messages.SUCCESS if changed else messages.WARNING)

    @admin.action(description="Pause selected queues", permissions=["operate_queue"])
    def pause_selected(self, request: HttpRequest, queryset: Any) -> None:
        self._each(request, queryset, services.pause_queue, "paused")

    @admin.action(description="Resume selected queues", permissions=["operate_queue"])
    def resume_selected(self, request: HttpRequest, queryset: Any) -> None:
        self._each(request, queryset, services.resume_queue, "resumed")

    def change_view(self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: Any = None) -> Any:
        buttons = []
        if has_perm(request, "operate_queue"):
            paused = Queue.objects.filter(name=unquote(object_id)).values_list("paused", flat=True).first()
            op = "resume" if paused else "pause"  # the one the queue's state allows
            buttons = [{"op": op, "label": op.capitalize(), "url": reverse("admin:boson_django_queue_op", args=[object_id, op])}]
        return super().change_view(request, object_id, form_url, {**(extra_context or {}), "queue_buttons": buttons})

    def get_urls(self) -> list[Any]:
        view = self.admin_site.admin_view(require_POST(self.queue_op_view))
        return [path("<path:object_id>/op/<str:op>/", view, name="boson_django_queue_op"), *super().get_urls()]

    @own_transactions
    def queue_op_view(self, request: HttpRequest, object_id: str, op: str) -> HttpResponseRedirect:
        if not has_perm(request, "operate_queue") or op not in ("pause", "resume"):
            raise PermissionDenied
        name = unquote(object_id)  # the admin's URL form of the name (``_`` is ``_5F``)
        if not Queue.objects.filter(name=name).exists():
            raise Http404("no such queue")
        if (services.pause_queue if op == "pause" else services.resume_queue)(name):
            audit.record(request, Queue, [name], f"{op.capitalize()}d")
            self.message_user(request, f"Queue {name} {op}d", messages.SUCCESS)
        else:
            self.message_user(request, f"Queue {name} already {op}d", messages.WARNING)
        return HttpResponseRedirect(reverse("admin:boson_django_queue_change", args=[object_id]))


admin.site.register(Queue, QueueAdmin)
