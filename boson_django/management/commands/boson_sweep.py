"""``manage.py boson_sweep``: run each sweep (promote, reclaim, evict, prune, schedule)
once, under the same duty leases workers use (a duty another node holds is reported and
skipped)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from boson_django import conf
from boson_django.management import arguments
from boson_django.management.output import PrintingCommand
from boson_django.management.store import checked_alias
from boson_django.worker.runtime import default_worker_id
from boson_django.worker.sweeper import Sweeper


class Command(PrintingCommand):
    help = ("Run the sweeps once: promote due jobs, reclaim expired leases, evict finished jobs, "
            "prune old throughput counters, tick due schedules.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--batch", type=arguments.positive, help="Most jobs per sweep call (default BOSON['SWEEP_BATCH']).")
        parser.add_argument("--database", help="Database alias of the store (default BOSON['DATABASE']).")

    def handle(self, *args: Any, **options: Any) -> None:
        settings = conf.get()
        sweeper = Sweeper(f"boson_sweep:{default_worker_id()}", checked_alias(options["database"]),
                          settings.SWEEP_INTERVAL_MS, options["batch"] or settings.SWEEP_BATCH)
        try:
            done = sweeper.run()
        finally:
            sweeper.release()
        for name, count in done.items():
            shown = "skipped (held by another node)" if count is None else str(count)
            self.stdout.write(f"{name.removeprefix('boson.')}: {shown}")
