"""The Django admin as boson's control plane: one module per concern, registered on admin.site.

Every change an operator makes goes through ``boson_django.services``; lists never load
payloads or results and never count past a cap.
"""

from boson_django.admin import buckets, config, dashboard, jobs, queues, runs, schedules, triage  # noqa: F401
