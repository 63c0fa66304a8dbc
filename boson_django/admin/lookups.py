"""Which query parameters a boson list page filters by: its declared filters' own, no more.

Django's ``ModelAdmin.lookup_allowed`` lets any lookup on a model's own columns through
the URL, so ``?kwargs__token__startswith=`` or ``?last_error__iregex=`` on the job list
made the database scan every job's payload or error text -- a page any viewer could ask
for, as often as they liked. Boson's list pages allow only the parameters of their list
filters (``QueueFilter``'s ``queue``, ``state``'s ``state__exact``...), of their date
hierarchy, and the few lookups the admin's own pages link to; Django answers any other
with ``DisallowedModelAdminLookup`` (400 Bad Request), as it does for a lookup across a
relation it does not allow.
"""

from __future__ import annotations

from typing import Any

from django.contrib.admin import widgets
from django.contrib.admin.filters import FieldListFilter, ListFilter, SimpleListFilter
from django.contrib.admin.utils import get_fields_from_path
from django.http import HttpRequest


def allowed(model_admin: Any, lookup: str, value: Any, request: HttpRequest | None) -> bool:
    """Whether ``?lookup=value`` on ``model_admin``'s list page is one of its filters'."""
    return lookup in declared(model_admin, request) or _raw_id_popup(model_admin, lookup, value)


def declared(model_admin: Any, request: HttpRequest | None) -> set[str]:
    """The query parameters ``model_admin``'s list page filters by (worked out once per
    request: a filter of all a column's values reads them to be built)."""
    cache = getattr(request, _CACHE, None) if request is not None else None
    if cache is None:
        cache = {}
        if request is not None:
            setattr(request, _CACHE, cache)
    if id(model_admin) not in cache:
        cache[id(model_admin)] = _declared(model_admin, request)
    return cache[id(model_admin)]


#: Set on a request: ``id(model_admin)`` -> :func:`declared`.
_CACHE = "_boson_declared_lookups"


def _declared(model_admin: Any, request: HttpRequest | None) -> set[str]:
    found = set(model_admin.linked_lookups)
    hierarchy = model_admin.date_hierarchy
    if hierarchy:
        found |= {f"{hierarchy}__year", f"{hierarchy}__month", f"{hierarchy}__day"}
    filters = model_admin.get_list_filter(request) if request is not None else model_admin.list_filter
    for item in filters:
        found |= _parameters(model_admin, request, item)
    return found


def _parameters(model_admin: Any, request: HttpRequest | None, item: Any) -> set[str]:
    """A list filter's parameters. A field's filter is built with no parameters to ask it
    (Django's own filters of a field's choices or of a boolean query nothing to be built,
    one of all a column's values reads them);
    a custom filter class is asked by its ``parameter_name``, without running its
    ``lookups()``; a field's own name (``?state=failed``, equality on the filtered column,
    as the dashboard's links and older bookmarks say it) is allowed too."""
    if isinstance(item, type) and issubclass(item, SimpleListFilter):
        return {str(item.parameter_name)}  # type: ignore[attr-defined]  # django-stubs: not declared
    if isinstance(item, type) and issubclass(item, ListFilter):
        return set(item(request, {}, model_admin.model, model_admin).expected_parameters())
    path, make = item if isinstance(item, (list, tuple)) else (item, FieldListFilter.create)
    if not isinstance(path, str):  # a Field object given instead of its name
        path = path.name
    field = get_fields_from_path(model_admin.model, path)[-1]
    spec = make(field, request, {}, model_admin.model, model_admin, field_path=path)
    return {path, *spec.expected_parameters()}


def _raw_id_popup(model_admin: Any, lookup: str, value: Any) -> bool:
    """A raw-id widget's popup of another model's foreign key to this one passes that
    key's ``limit_choices_to`` as lookups (code's, not a visitor's): allowed, as Django
    allows them."""
    for fk_lookup in model_admin.model._meta.related_fkey_lookups:
        if callable(fk_lookup):
            fk_lookup = fk_lookup()
        if (lookup, value) in widgets.url_params_from_lookup_dict(fk_lookup).items():
            return True
    return False
