"""Periodic jobs: schedules declared in code or settings, fired once per slot by workers.

``from boson_django.schedules import Schedule`` for declarations; the functions below
are the scheduler's service layer (each one short transaction on the store clock).
"""

from boson_django.schedules.spec import RUN_ONCE, SKIP, Schedule

__all__ = ["RUN_ONCE", "SKIP", "Schedule", "run_due", "run_now", "set_enabled", "sync_schedules"]


def __getattr__(name: str):  # lazy: spec is imported by backend.py before models are ready
    if name == "sync_schedules":
        from boson_django.schedules.declared import sync_schedules

        return sync_schedules
    if name in ("run_due", "run_now", "set_enabled", "fire_slot", "DUTY"):
        from boson_django.schedules import scheduler

        return getattr(scheduler, name)
    raise AttributeError(name)
