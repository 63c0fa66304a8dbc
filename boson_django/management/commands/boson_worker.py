"""``manage.py boson_worker``: parse the options, run :class:`boson_django.worker.Worker`."""

from __future__ import annotations

import ipaddress
import logging
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError, CommandParser

from boson_django.management import arguments
from boson_django.management.store import checked_alias
from boson_django.worker import Worker, WorkerOptions, reloading
from boson_django.worker.shutdown import EXIT_WAIT_S, exit_within


class Command(BaseCommand):
    help = "Run boson jobs: admit, execute and acknowledge them until stopped (SIGTERM/SIGINT/SIGHUP drain gracefully)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--queue", action="append", default=[], dest="queues", type=arguments.queue_name,
                            help="Queue to work (repeatable). Default: every queue.")
        parser.add_argument("--concurrency", type=arguments.positive, help="Jobs run at once (default BOSON['CONCURRENCY']).")
        parser.add_argument("--burst", action="store_true", help="Run what is due, then exit 0.")
        parser.add_argument("--max-jobs", type=arguments.positive, help="Exit 0 after admitting this many jobs.")
        parser.add_argument("--poll-interval-ms", type=arguments.positive, help="Idle poll period (default BOSON['POLL_INTERVAL_MS']).")
        parser.add_argument("--no-notify", action="store_true", help="Poll only: no LISTEN/NOTIFY (PgBouncer, SQLite).")
        parser.add_argument("--worker-id", type=arguments.worker_id, help="Name recorded on leases and runs (default host:pid:random).")
        parser.add_argument("--grace-seconds", type=arguments.seconds,
                            help="On SIGTERM, how long running jobs may finish (default BOSON['SHUTDOWN_GRACE_MS']).")
        parser.add_argument("--database", help="Database alias of the store (default BOSON['DATABASE']).")
        parser.add_argument("--metrics-port", type=arguments.port,
                            help="Serve Prometheus metrics on this port (needs the 'metrics' extra).")
        parser.add_argument("--metrics-addr",
                            help="Address the metrics port listens on (default 127.0.0.1, this machine only). "
                                 "Another address exposes it unauthenticated, worker host:pid names included: "
                                 "firewall it to your scraper.")
        parser.add_argument("--reload", action="store_true",
                            help="Development: restart when a Python file changes, as runserver does "
                                 "(running jobs finish or are released first).")

    def execute(self, *args: Any, **options: Any) -> Any:
        """With ``--reload`` the checks run in the reloading child, where one that fails
        waits for the fix instead of ending the command (as runserver's do)."""
        self._deferred_checks = bool(options.get("reload")) and not options.get("skip_checks")
        if self._deferred_checks:
            options["skip_checks"] = True
        return super().execute(*args, **options)

    #: The worker that ran and its exit status, once it returned.
    _ended: tuple[Worker, int] | None = None

    def run_from_argv(self, argv: list[str]) -> None:
        """From the command line, the process ends with the worker: once the worker
        returns (stopped, or --burst and --max-jobs done), :func:`exit_within` ends it even
        if a handler left a thread running. Not from ``call_command``, whose process goes
        on after the command."""
        try:
            super().run_from_argv(argv)
        finally:
            if self._ended is not None:
                worker, status = self._ended
                grace_left = worker.shutdown.seconds_left() if worker.shutdown.stopping else 0.0
                exit_within(max(grace_left, EXIT_WAIT_S), status)

    def handle(self, *args: Any, **options: Any) -> None:
        _log_to_stderr(options["verbosity"])
        if options["reload"] and not reloading.in_child():
            _end(reloading.supervise())
            return
        _serve_metrics(options["metrics_port"], options["metrics_addr"])
        using = checked_alias(options["database"])
        grace = options["grace_seconds"]
        worker = Worker(WorkerOptions(
            queues=options["queues"],
            concurrency=options["concurrency"],
            burst=options["burst"],
            max_jobs=options["max_jobs"],
            poll_interval_ms=options["poll_interval_ms"],
            notify=False if options["no_notify"] else None,
            worker_id=options["worker_id"],
            grace_ms=None if grace is None else int(grace * 1000),
            using=using,
            handle_signals=not options["reload"],
        ))
        if options["reload"]:
            status = reloading.watch(worker, prepare=self.check if self._deferred_checks else _nothing)
        else:
            status = worker.run()
        self._ended = (worker, status)
        _end(status)


def _nothing() -> None:
    pass


def _end(status: int) -> None:
    """End the command with ``status``: a reloading child's 3 asks its parent to start it
    again."""
    if status:
        raise SystemExit(status)


def _serve_metrics(port: int | None, addr: str | None) -> None:
    """Start the metrics server, or stop with an error naming the option: a port another
    worker holds ended in a traceback, and under ``Restart=always`` in a crash loop."""
    if port is None:
        if addr is not None:
            raise CommandError("--metrics-addr needs --metrics-port", returncode=2)
        return
    try:
        from boson_django.metrics import serve
        from boson_django.metrics.server import DEFAULT_ADDR
    except ImproperlyConfigured as exc:  # the metrics extra is not installed
        raise CommandError(f"--metrics-port: {exc}") from exc
    addr = addr or DEFAULT_ADDR
    try:
        server, _ = serve(port, addr)
    except OSError as exc:
        raise CommandError(f"--metrics-port {port} --metrics-addr {addr}: cannot listen there: {exc}") from exc
    host, bound = server.server_address[:2]
    log = logging.getLogger("boson_django.metrics")
    log.info("boson: metrics on http://%s:%s/metrics", _url_host(host), bound)
    if not ipaddress.ip_address(host).is_loopback:
        log.warning("boson: the metrics port %s:%s is reachable from other machines, with no authentication; "
                    "its page names the workers (host:pid): keep it behind a firewall", host, bound)


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _log_to_stderr(verbosity: int) -> None:
    """Show the worker's own log lines when the project configured no logging for them:
    verbosity 0 warnings only, 1 (default) one line per job, 2+ debug."""
    logger = logging.getLogger("boson_django")
    if logger.handlers or logging.getLogger().handlers:
        return
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    logger.addHandler(handler)
    logger.setLevel({0: logging.WARNING, 1: logging.INFO}.get(verbosity, logging.DEBUG))
