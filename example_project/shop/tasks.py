"""The demo shop's background work: one task of every kind a Django project meets.

Plain Django ``@task`` functions; the keyword arguments after the standard ones
(``rate_class``, ``max_attempts``, ``unique_key``, ``lease_ms``...) are boson_django's
per-task policy. ``time.sleep`` calls stand for real work (rendering, network calls).
"""

from __future__ import annotations

import logging
import os
import signal
import time
from typing import Any

try:
    from django.tasks import task
except ImportError:  # Django 5.2: the django-tasks backport
    from django_tasks import task

from shop import mail, partner

log = logging.getLogger("shop.tasks")

#: The rate class of outgoing mail; shop.limits gives it a token bucket.
SMTP = "smtp"


@task(queue_name="emails", rate_class=SMTP, max_attempts=5, discard_on=(mail.AddressRejected,))
def send_order_email(order_id: int, to: str) -> dict[str, Any]:
    """Rate-limited: admission takes a token from the ``smtp`` bucket for every send. A
    rejected address is in ``discard_on``: the job fails at once instead of retrying."""
    time.sleep(0.05)
    mail.send(order_id, to)
    log.info("mail for order %s sent to %s", order_id, to)
    return {"order": order_id, "to": to}


@task(queue_name="media", takes_context=True)
def make_thumbnail(context: Any, image_id: int, sizes: list[int]) -> dict[str, Any]:
    """Reports progress after every size and publishes the finished files as output.
    A size takes ``size`` ms to render: 4096 px takes four seconds."""
    done: list[str] = []
    for size in sizes:
        time.sleep(size / 1000)
        done.append(f"/media/thumbs/{image_id}-{size}.webp")
        context.progress(len(done), len(sizes), f"{size}px done")
        context.output({"thumbnails": done})
    return {"image": image_id, "thumbnails": done}


@task(queue_name="partners", takes_context=True, max_attempts=5)
def sync_partner_order(context: Any, order_id: int) -> dict[str, Any]:
    """Pushes an order to a flaky partner API.

    An exception (HTTP 503) is a failed attempt: boson retries it with backoff; an order
    the partner never takes (HTTP 500 every time) fails for good once its five attempts
    are spent. An HTTP 429 is not a failure: ``context.rate_limited`` reschedules the job after the
    partner's Retry-After without spending an attempt.
    """
    throttled_before = bool((context.last_checkpoint or {}).get("throttled"))
    reply = partner.push_order(order_id, attempt=context.attempt, throttled_before=throttled_before)
    if reply.status == 429:
        context.checkpoint({"throttled": True})
        log.info("partner throttled order %s; retrying in %d ms", order_id, reply.retry_after_ms)
        context.rate_limited(reply.retry_after_ms)
    if reply.status >= 500:
        raise partner.PartnerUnavailable(f"partner answered HTTP {reply.status} for order {order_id}")
    return {"order": order_id, "status": reply.status, "attempt": context.attempt}


REPORT_STEPS = 12


@task(queue_name="reports", takes_context=True, lease_ms=5_000)
def build_sales_report(context: Any, month: str) -> dict[str, Any]:
    """A long job in steps. Each step's state is checkpointed before the next one starts,
    so after a crash the next attempt resumes where the last checkpoint left off."""
    state = context.last_checkpoint or {"done": 0, "total": 0}
    resumed_from = state["done"]
    if resumed_from:
        log.info("report %s resumes after step %d", month, resumed_from)
    for step in range(resumed_from + 1, REPORT_STEPS + 1):
        time.sleep(0.25)
        state = {"done": step, "total": state["total"] + step * 100}
        context.checkpoint(state)
        context.progress(step, REPORT_STEPS, f"day block {step}")
    return {"month": month, "total": state["total"], "resumed_from": resumed_from,
            "crashes_survived": context.crash_attempt}


@task(queue_name="maintenance", unique_key="search-index")
def rebuild_search_index() -> dict[str, Any]:
    """Deduplicated: while one rebuild waits or runs, enqueueing another returns it."""
    time.sleep(0.3)
    return {"indexed_products": 250}


@task(queue_name="risky", lease_ms=2_000)
def import_supplier_feed(feed: str) -> dict[str, Any]:
    """A poison pill for ``corrupt.csv``: the (simulated) native parser kills its worker
    process. Each crash is counted apart from attempts; at ``CRASH_LIMIT`` the job is
    quarantined and later copies of it park until an operator releases it."""
    if feed == "corrupt.csv":
        if os.environ.get("BOSON_DEMO_ALLOW_CRASH") != "1":
            raise RuntimeError("refusing to kill this process: only demo workers may crash")
        log.critical("parser crashed on %s", feed)
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(0.1)
    return {"feed": feed, "rows": 1_200}
