"""``manage.py boson_demo``: the whole demo in one command.

Starts from a fresh database, migrates, creates an admin login, enqueues the shop's mix
of jobs, starts worker processes and the development server, then keeps enqueueing a few
of the shop's jobs a second and shows the queues live until Ctrl-C. ``--drain`` is the non-interactive mode for CI: no server, the store clock
frozen and stepped (no waiting for backoff or lease expiry), and an exit status that
says whether every job ended where it should.
"""

from __future__ import annotations

import secrets
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from boson_django import services
from boson_django.management import arguments

from shop.demo import database, display, live, mix
from shop.demo.supervisor import Supervisor
from shop.demo.timekeeper import ReportKiller, Timekeeper


#: How long ``--drain`` waits for every job to settle, unless ``--timeout`` says otherwise.
DRAIN_TIMEOUT_S = 180.0


class Command(BaseCommand):
    help = "Run the boson_django demo: workers, the admin, a trickle of jobs and a live view of the queues."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--drain", action="store_true",
                            help="Non-interactive: drain every job on a stepped store clock, check where each ended, exit.")
        parser.add_argument("--port", type=arguments.port, default=8000, help="Development server port (default 8000, or the next free one).")
        parser.add_argument("--keep", action="store_true", help="Keep the existing demo database instead of starting fresh.")
        parser.add_argument("--timeout", type=arguments.seconds, default=None,
                            help=f"--drain: give up after this many seconds (default {DRAIN_TIMEOUT_S:g}); "
                                 "otherwise stop after this many seconds, as Ctrl-C does (default: run until Ctrl-C).")
        parser.add_argument("--log-dir", default=str(Path(settings.BASE_DIR) / "demo-logs"),
                            help="Where worker and server logs go.")

    def handle(self, *args: Any, **options: Any) -> None:
        if not options["keep"]:
            database.reset()
        call_command("migrate", interactive=False, verbosity=0)
        keeper = Timekeeper()
        keeper.start() if options["drain"] else keeper.stop()
        password = _admin_login()
        if not options["drain"]:
            services.pause_queue(live.PAUSED_AT_START)
        plan = mix.enqueue_mix()
        supervisor = Supervisor(Path(options["log_dir"]))
        self.stdout.write(f"store: {database.describe()}; {len(plan.job_ids)} jobs enqueued; logs in {options['log_dir']}")
        _stop_like_ctrl_c(signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
        try:
            supervisor.start_workers()
            if options["drain"]:
                self._drain(plan, supervisor, keeper, DRAIN_TIMEOUT_S if options["timeout"] is None else options["timeout"])
            else:
                self._live(plan, supervisor, options["port"], password, options["timeout"])
        except KeyboardInterrupt:
            self.stdout.write("\nstopping workers and the server...")
        finally:
            supervisor.stop_all()
            if options["drain"]:
                keeper.stop()
        if options["drain"]:
            self._verdict(plan)

    # -- interactive ----------------------------------------------------------------------

    def _live(self, plan: mix.Plan, supervisor: Supervisor, port: int, password: str, stop_after: float | None) -> None:
        port = _free_port(port)
        supervisor.start_server(port)
        head = live.header(database.describe(), f"http://127.0.0.1:{port}/admin/", password)
        live.run(self.stdout.write, supervisor, plan.report_id, head, tty=sys.stdout.isatty(), stop_after=stop_after)

    # -- non-interactive ------------------------------------------------------------------

    def _drain(self, plan: mix.Plan, supervisor: Supervisor, keeper: Timekeeper, timeout: float) -> None:
        killer = ReportKiller(plan.report_id, supervisor)
        deadline = time.monotonic() + timeout
        last_print = 0.0
        while time.monotonic() < deadline:
            supervisor.restart_dead()
            jobs = mix.snapshot()
            killer.tick(jobs)
            if display.settled(jobs) == len(jobs):
                break
            step = keeper.tick(jobs, supervisor.alive_ids())
            if step is not None:
                supervisor.events.append(f"store clock stepped {step} ms")
            if time.monotonic() - last_print > 2:
                last_print = time.monotonic()
                self.stdout.write(display.bar(display.settled(jobs), len(jobs)))
            time.sleep(0.1)
        else:
            self.stdout.write(display.frame(["timed out; the store now holds:"], mix.snapshot(), supervisor.events))
        self.stdout.write("\n".join(["events:", *(f"  {e}" for e in supervisor.events if "stepped" not in e)]))
        self.stdout.write(f"store clock stepped {keeper.steps} times instead of waiting")

    def _verdict(self, plan: mix.Plan) -> None:
        failures = 0
        for group, problem in mix.check(plan):
            failures += problem is not None
            mark = "ok  " if problem is None else "FAIL"
            self.stdout.write(f"{mark} {group.name:<14} {group.expect}" + (f"\n     -> {problem}" if problem else ""))
        problems = services.find_problems()
        for problem in problems:
            self.stdout.write(f"FAIL invariant: {problem}")
        if failures or problems:
            raise CommandError(f"{failures} job groups did not end as expected")
        self.stdout.write(self.style.SUCCESS("every demo job ended where it should"))


def _admin_login() -> str:
    """Create (or reset) the ``admin`` superuser; returns its new random password."""
    password = secrets.token_urlsafe(9)
    user_model = get_user_model()
    user = user_model.objects.filter(username="admin").first()
    if user is None:
        user_model.objects.create_superuser("admin", "admin@example.com", password)
    else:
        user.set_password(password)
        user.save()
    return password


def _stop_like_ctrl_c(*signums: signal.Signals) -> None:
    """Ctrl-C, a ``kill`` or a closed terminal stop the demo alike. SIGINT is handled here
    too, not left to Python's default: a process started where SIGINT is ignored (a
    background job of a script without job control) inherits that, and Python then
    installs no handler of its own, so Ctrl-C would not stop it. The workers and
    the server run in sessions of their own (so that Ctrl-C reaches only this process);
    ended by the default action of SIGTERM or SIGHUP, this process would leave them
    running, holding the demo's database."""

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    for signum in signums:
        signal.signal(signum, interrupt)


def _free_port(first: int) -> int:
    last = min(first + 19, 65535)
    for port in range(first, last + 1):
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) != 0:
                return port
    raise CommandError(f"no free port in {first}..{last}; pass --port")


