"""``manage.py boson_status``: a terminal overview for operators without a browser.

Read-only: queues x states, running leases, duties, quarantined jobs, the oldest job
waiting to run. Times are shown against the store clock.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.core.management.base import CommandParser
from django.db.models import Count

from boson_django import clock
from boson_django.durations import duration
from boson_django.management import arguments
from boson_django.management.output import PrintingCommand
from boson_django.management.store import checked_alias
from boson_django.models import Duty, Job, Queue
from boson_django.states import JobState

STATES = [s.value for s in JobState]
WAITING = [JobState.AVAILABLE.value, JobState.SCHEDULED.value, JobState.RETRYABLE.value]


class Command(PrintingCommand):
    help = "Show queues x states, running leases, duties, quarantined jobs and the oldest waiting job."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--leases", type=arguments.whole(0), default=20, help="How many running leases to list.")
        parser.add_argument("--database", help="Database alias of the store (default BOSON['DATABASE']).")

    def handle(self, *args: Any, **options: Any) -> None:
        using = checked_alias(options["database"])
        now = clock.now(using)
        self.stdout.write(f"store time {now.isoformat()}")
        self._queues(using)
        self._leases(using, now, options["leases"])
        self._duties(using, now)
        self._summary(using, now)

    def _queues(self, using: str) -> None:
        grid: dict[str, dict[str, int]] = {}
        rows = Job.objects.using(using).order_by().values_list("queue", "state").annotate(n=Count("id"))
        for queue, state, n in rows:
            grid.setdefault(queue, {})[state] = n
        paused = set(Queue.objects.using(using).filter(paused=True).values_list("name", flat=True))
        for name in Queue.objects.using(using).values_list("name", flat=True):
            grid.setdefault(name, {})
        width = max([len("queue")] + [len(q) + 9 for q in grid])
        self.stdout.write("\n" + "queue".ljust(width) + "".join(s[:11].rjust(12) for s in STATES))
        for queue in sorted(grid):
            label = queue + (" (paused)" if queue in paused else "")
            self.stdout.write(label.ljust(width) + "".join(str(grid[queue].get(s, 0)).rjust(12) for s in STATES))
        if not grid:
            self.stdout.write("(no queues yet)")

    def _leases(self, using: str, now: datetime, limit: int) -> None:
        running = Job.objects.using(using).filter(state=JobState.RUNNING.value).order_by("lease_expires_at")
        total = running.count()
        self.stdout.write(f"\nrunning leases: {total}")
        for job in running.values("id", "task", "lease_holder", "fence", "lease_expires_at")[:limit]:
            expiry = job["lease_expires_at"]
            left = "expired" if expiry is None or expiry <= now else f"expires in {duration(expiry - now)}"
            self.stdout.write(f"  {job['id']}  {job['task']}  holder={job['lease_holder']}  fence={job['fence']}  {left}")

    def _duties(self, using: str, now: datetime) -> None:
        self.stdout.write("\nduties:")
        duties = list(Duty.objects.using(using).order_by("name"))
        for duty in duties:
            state = f"held by {duty.holder}, expires in {duration(duty.expires_at - now)}" if duty.expires_at > now else "free"
            self.stdout.write(f"  {duty.name}: {state}")
        if not duties:
            self.stdout.write("  (none claimed yet)")

    def _summary(self, using: str, now: datetime) -> None:
        jobs = Job.objects.using(using)
        self.stdout.write(f"\nquarantined: {jobs.filter(state=JobState.QUARANTINED.value).count()}")
        due = jobs.filter(state__in=WAITING, run_at__lte=now).order_by("run_at", "id")
        oldest = due.values("id", "task", "queue", "run_at").first()
        if oldest is None:
            self.stdout.write("oldest waiting job: none due")
        else:
            self.stdout.write(
                f"oldest waiting job: {oldest['id']} {oldest['task']} on {oldest['queue']}, due {duration(now - oldest['run_at'])} ago"
            )
