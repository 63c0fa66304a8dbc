"""The demo's mix of jobs, and where each of them must end.

``enqueue_mix()`` enqueues through Django's standard ``Task.enqueue``; ``check(plan)``
compares the store with the expectations and returns one line per job group.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from boson_django import services

from shop import limits, mail, partner
from shop.tasks import (
    REPORT_STEPS,
    build_sales_report,
    import_supplier_feed,
    make_thumbnail,
    rebuild_search_index,
    send_order_email,
    sync_partner_order,
)

EMAILS = 12
THUMBNAILS = 4
PARTNER_ORDERS = 9
INDEX_REQUESTS = 5
SIZES = [64, 128, 256, 512]
POISON_FEED = "corrupt.csv"


@dataclass
class Group:
    """Jobs of one kind, what they should end as, and how to check it."""

    name: str
    expect: str
    check: Callable[[list[str], dict[str, Any]], str | None]
    job_ids: list[str] = field(default_factory=list)


@dataclass
class Plan:
    groups: list[Group]

    @property
    def job_ids(self) -> set[str]:
        return {job_id for group in self.groups for job_id in group.job_ids}

    def group(self, name: str) -> Group:
        return next(g for g in self.groups if g.name == name)

    @property
    def report_id(self) -> str:
        return self.group("report").job_ids[0]


def enqueue_mix() -> Plan:
    limits.configure()
    plan = Plan([
        Group("emails", f"{EMAILS} completed, no more started at one instant than the smtp bucket holds", _emails),
        Group("email bounced", "failed at its first attempt, not retried (discard_on)", _bounced),
        Group("thumbnails", "completed with progress 4/4 and their files as output", _thumbnails),
        Group("partner ok", "completed on the first attempt", _partner(1, [], throttled=False)),
        Group("partner flaky", "retried twice (HTTP 503), then completed", _partner(3, ["retry", "retry"], throttled=False)),
        Group("partner 429", "rate-limited once (no attempt spent), then completed", _partner(1, [], throttled=True)),
        Group("partner down", f"HTTP 500 on all {sync_partner_order.max_attempts} attempts, failed", _partner_down),
        Group("report", "killed mid-run, resumed from its checkpoint, completed", _report),
        Group("search index", f"{INDEX_REQUESTS} requests deduplicated into 1 completed job", _index),
        Group("supplier feed", "completed", _completed),
        Group("poison feed", "killed 3 workers, quarantined; attempts untouched", _poison),
    ])
    for n in range(EMAILS):
        plan.group("emails").job_ids.append(send_order_email.enqueue(1001 + n, mail.address(n)).id)
    plan.group("email bounced").job_ids.append(send_order_email.enqueue(1099, mail.address(99, mistyped=True)).id)
    for image in range(1, THUMBNAILS + 1):
        plan.group("thumbnails").job_ids.append(make_thumbnail.enqueue(image, SIZES).id)
    for order in range(1, PARTNER_ORDERS + 1):
        kinds = {"ok": "partner ok", "flaky": "partner flaky", "throttled": "partner 429", "down": "partner down"}
        name = kinds[partner.kind_of(order)]
        plan.group(name).job_ids.append(sync_partner_order.enqueue(order).id)
    plan.group("report").job_ids.append(build_sales_report.enqueue("2030-01").id)
    for _ in range(INDEX_REQUESTS):
        plan.group("search index").job_ids.append(rebuild_search_index.enqueue().id)
    plan.group("supplier feed").job_ids.append(import_supplier_feed.enqueue("daily.csv").id)
    plan.group("poison feed").job_ids.append(import_supplier_feed.enqueue(POISON_FEED).id)
    return plan


def snapshot() -> dict[str, Any]:
    """Every job the store holds, as list reads show it (no payloads, no results)."""
    return {job.id: job for job in services.list_jobs(limit=100_000)}


def check(plan: Plan) -> list[tuple[Group, str | None]]:
    """Each group with ``None`` when it ended as expected, else what is wrong."""
    jobs = snapshot()
    return [(group, group.check(group.job_ids, jobs)) for group in plan.groups]


# -- the checks --------------------------------------------------------------------------

def _states(ids: list[str], jobs: dict[str, Any], state: str, attempt: int | None = None) -> str | None:
    for job_id in ids:
        job = jobs.get(job_id)
        if job is None or job.state != state:
            return f"job {job_id} is {getattr(job, 'state', 'gone')}, expected {state}"
        if attempt is not None and job.attempt != attempt:
            return f"job {job_id} spent {job.attempt} attempts, expected {attempt}"
    return None


def _completed(ids: list[str], jobs: dict[str, Any]) -> str | None:
    return _states(ids, jobs, "completed", attempt=1)


def _emails(ids: list[str], jobs: dict[str, Any]) -> str | None:
    problem = _completed(ids, jobs)
    if problem:
        return problem
    # On the frozen clock the bucket refills only when the clock is stepped: no instant
    # starts more mails than it holds, so 12 mails start at 3 instants at least.
    starts = Counter(run.started_at for job_id in ids for run in services.list_runs(job_id=job_id))
    burst = limits.SMTP_LIMIT["burst"]
    at, most = max(starts.items(), key=lambda item: item[1])
    if most > burst:
        return f"{most} mails started at {at:%H:%M:%S.%f} on the store clock; the bucket holds {burst}"
    return None


def _failed_after(ids: list[str], jobs: dict[str, Any], attempts: int, says: str) -> str | None:
    """Failed for good after ``attempts`` attempts, each recorded with an error saying ``says``."""
    problem = _states(ids, jobs, "failed", attempt=attempts)
    if problem:
        return problem
    for job_id in ids:
        records = services.errors(job_id)
        if len(records) != attempts or not all(says in (r.error or "") for r in records):
            return f"job {job_id} attempt records are {[(r.outcome, r.error) for r in records]}, expected {attempts} saying {says!r}"
    return None


def _bounced(ids: list[str], jobs: dict[str, Any]) -> str | None:
    return _failed_after(ids, jobs, 1, "550 5.1.1")


def _partner_down(ids: list[str], jobs: dict[str, Any]) -> str | None:
    return _failed_after(ids, jobs, sync_partner_order.max_attempts, "HTTP 500")


def _thumbnails(ids: list[str], jobs: dict[str, Any]) -> str | None:
    problem = _completed(ids, jobs)
    for job_id in ids:
        progress, output = services.get_progress(job_id), services.get_output(job_id)
        if progress is None or (progress.current, progress.total) != (len(SIZES), len(SIZES)):
            return f"job {job_id} progress is {progress}, expected {len(SIZES)}/{len(SIZES)}"
        if output is None or len(output.data["thumbnails"]) != len(SIZES):
            return f"job {job_id} output is {output}"
    return problem


def _partner(attempts: int, records: list[str], *, throttled: bool) -> Callable[[list[str], dict[str, Any]], str | None]:
    def check(ids: list[str], jobs: dict[str, Any]) -> str | None:
        problem = _states(ids, jobs, "completed", attempt=attempts)
        for job_id in ids:
            # A success is an attempt record only when its handler logged something.
            found = [r.outcome for r in services.errors(job_id) if r.outcome != "success"]
            if found != records:
                return f"job {job_id} attempt records are {found}, expected {records}"
            outcomes = {run.outcome for run in services.list_runs(job_id=job_id)}
            if throttled != ("rate_limited" in outcomes):
                return f"job {job_id} runs ended {sorted(outcomes)}"
        return problem
    return check


def _report(ids: list[str], jobs: dict[str, Any]) -> str | None:
    problem = _completed(ids, jobs)
    if problem:
        return problem
    job, result = jobs[ids[0]], services.get_result(ids[0])
    if job.crash_attempt != 1:
        return f"the report counted {job.crash_attempt} crashes, expected 1 (the demo kills its worker once)"
    resumed = result.data["resumed_from"] if result else 0
    if not 0 < resumed < REPORT_STEPS:
        return f"the report resumed from step {resumed}, expected a step of its checkpoint"
    return None


def _index(ids: list[str], jobs: dict[str, Any]) -> str | None:
    if len(set(ids)) != 1:
        return f"{len(set(ids))} jobs were created, expected 1"
    return _completed(ids[:1], jobs)


def _poison(ids: list[str], jobs: dict[str, Any]) -> str | None:
    problem = _states(ids, jobs, "quarantined", attempt=0)
    if problem:
        return problem
    job = jobs[ids[0]]
    records = [r.outcome for r in services.errors(job.id)]
    if job.crash_attempt != 3 or records != ["lease_lost"] * 3:
        return f"crash_attempt={job.crash_attempt}, records={records}; expected 3 lost leases"
    return None
