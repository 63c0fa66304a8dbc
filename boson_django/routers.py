"""``DATABASE_ROUTERS = ["boson_django.routers.StoreRouter"]``: the store on its own database.

With ``BOSON["DATABASE"]`` naming an alias other than ``default``, the services, the
worker and the management commands use that alias, but Django's ORM -- the admin's
pages, ``migrate`` -- sends boson_django's models wherever the project's routers do:
without a router, to ``default``. The admin then showed (and acted on) another
database's jobs. This router sends boson_django's models, their reads, writes and
migrations, to ``BOSON["DATABASE"]`` and leaves every other app alone.
"""

from __future__ import annotations

from typing import Any

from boson_django import conf

APP_LABEL = "boson_django"


class StoreRouter:
    """Route boson_django's models to ``BOSON["DATABASE"]``; no opinion on other apps."""

    def db_for_read(self, model: Any, **hints: Any) -> str | None:
        return conf.get().DATABASE if model._meta.app_label == APP_LABEL else None

    def db_for_write(self, model: Any, **hints: Any) -> str | None:
        return self.db_for_read(model, **hints)

    def allow_migrate(self, db: str, app_label: str, model_name: str | None = None, **hints: Any) -> bool | None:
        if app_label != APP_LABEL:
            return None
        return db == conf.get().DATABASE
