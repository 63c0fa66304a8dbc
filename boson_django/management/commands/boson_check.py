"""``manage.py boson_check``: run the store's invariant checks (``find_problems``).

Read-only. Prints one line per broken rule with the jobs that break it and exits 1 when
anything is found (0 when the store is sound), so it fits a cron job or a deploy gate.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from boson_django.management.output import PrintingCommand
from boson_django.management.store import checked_alias
from boson_django.services import find_problems


class Command(PrintingCommand):
    help = "Check the store's invariants (leases, runs, fences, attempt accounting); exit 1 on problems."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--stranded-after-ms", type=int, default=60_000,
            help="Report running jobs whose lease expired longer ago than this (default 60000; -1 skips).",
        )
        parser.add_argument("--database", help="Database alias of the store (default BOSON['DATABASE']).")

    def handle(self, *args: Any, **options: Any) -> None:
        stranded = options["stranded_after_ms"]
        problems = find_problems(
            stranded_after_ms=None if stranded < 0 else stranded, using=checked_alias(options["database"]),
        )
        if not problems:
            self.stdout.write("boson_check: no problems found")
            return
        for problem in problems:
            self.stdout.write(f"PROBLEM {problem}")
        raise CommandError(f"boson_check: {len(problems)} invariant(s) broken", returncode=1)
