"""ack and ack_many: fenced acks, one or many in one transaction, each applied on its own.

:func:`ack` is :func:`ack_many` of one. Every ack is validated, and its job row locked
and required to be ``running`` with the caller's fence and an unexpired lease on the
store clock; it is applied, or refused with ``LeaseRejected``, independently of the
others: a stale lease in the batch changes nothing and does not stop the rest. The
plain successes (SUCCESS with no weight correction, error or log lines) are written with
a bounded number of statements for the whole batch (one, where the driver has
:meth:`~boson_django.drivers.acks.AckStatements.complete_plain`); every other ack goes
through :func:`boson_django.services.acks.apply`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
import random
from typing import Any, NamedTuple

from boson_django import clock, conf, transitions
from boson_django.errors import InvalidEnvelope, LeaseRejected, StoreError
from boson_django.models import Job
from boson_django import database, drivers
from boson_django.services import acks, decide, leases, throughput
from boson_django.services.types import LeaseRef
from boson_django.states import JobState, Outcome


class AckRequest(NamedTuple):
    """One ack of a batch: the arguments :func:`ack` takes."""

    lease: Any
    outcome: Outcome | str
    error: str | None = None
    delay_ms: int | float | None = None
    logs: Sequence[str] = ()
    actual_weight: float | None = None
    result: Any = None


class AckReply(NamedTuple):
    """What happened to one ack: the new ``state`` (None: deleted) at store time ``at``,
    or the ``error`` (``LeaseRejected``, ``InvalidEnvelope``) that refused it."""

    lease: LeaseRef | None
    state: str | None = None
    at: datetime | None = None
    error: StoreError | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def ack(
    lease: Any,
    outcome: Outcome | str,
    *,
    error: str | None = None,
    delay_ms: int | float | None = None,
    logs: Sequence[str] = (),
    actual_weight: float | None = None,
    result: Any = None,
    using: str | None = None,
) -> str | None:
    """Apply the handler's outcome to a running job; returns the new state (None: deleted).

    :func:`ack_many` of one: locks the job row; accepts only a held lease (``running``,
    same fence, unexpired), otherwise raises ``LeaseRejected`` and writes nothing; a bad
    argument raises ``InvalidEnvelope`` naming it. ``actual_weight`` corrects the
    admission charge in the same transaction. Not idempotent: a second ack of the same
    lease is rejected, because the first one ended it.
    """
    reply = ack_many([AckRequest(lease, outcome, error, delay_ms, logs, actual_weight, result)], using=using)[0]
    if reply.error is not None:
        raise reply.error
    return reply.state


def ack_many(requests: Sequence[AckRequest], *, using: str | None = None) -> list[AckReply]:
    """Apply many acks in one transaction; one reply per request, in order.

    Locks the batch's job rows (in id order where the engine locks rows). Each ack is
    validated and fenced on its own: a bad one gets ``InvalidEnvelope``, a lease no longer
    held (stale fence, not running, expired, acked twice in the batch) gets
    ``LeaseRejected`` in its reply, and neither changes anything nor affects the others.
    Not idempotent, like :func:`ack`.

    Where the driver completes plain successes in one statement, they go first (its own
    transaction unless the caller has one); the rest, and any of those whose lease no
    longer held, then take the general path in a second transaction.
    """
    db = database.alias(using)
    replies: list[AckReply | None] = [None] * len(requests)
    rest = _ack_plain(requests, replies, db)
    if rest:
        for i, reply in zip(rest, _ack_sliced([requests[i] for i in rest], db)):
            replies[i] = reply
    return replies  # type: ignore[return-value]


#: Parameters the general path's statements bind per ack at most (a result's row: five),
#: and besides them.
_BOUND_PER_ACK, _BOUND_BESIDES_ACKS = 5, 8


def _ack_sliced(requests: list[AckRequest], using: str) -> list[AckReply]:
    """:func:`_ack_general` over as many acks at a time as the engine lets one statement
    list (its statements list the whole slice), all in one transaction: the batch still
    commits whole."""
    size = database.most_listed(database.conn(using), each=_BOUND_PER_ACK, besides=_BOUND_BESIDES_ACKS)
    if len(requests) <= size:  # one slice: no transaction around its own
        return _ack_general(requests, using=using)
    return _ack_in_slices(requests, size, using=using)


@database.store_transaction
def _ack_in_slices(requests: list[AckRequest], size: int, *, using: str | None = None) -> list[AckReply]:
    return [reply for part in database.in_slices(requests, size) for reply in _ack_general(part, using=using)]


def _ack_plain(requests: Sequence[AckRequest], replies: list[AckReply | None], using: str) -> list[int]:
    """Complete the batch's plain successes in one statement where the driver has one;
    the indexes left for the general path (everything else, and plain ones the statement
    did not match)."""
    driver = drivers.for_alias(using)
    if not driver.completes_plain:
        return list(range(len(requests)))
    plain: dict[str, tuple[int, LeaseRef, acks.Checked]] = {}
    seen: set[str] = set()
    twice: set[str] = set()
    for i, req in enumerate(requests):
        try:
            ref = leases.as_lease(req.lease)
            ok = acks.check(req.outcome, req.error, req.delay_ms, req.logs, req.actual_weight, req.result)
        except InvalidEnvelope:
            continue
        if ref.job_id in seen:
            twice.add(ref.job_id)
        seen.add(ref.job_id)
        if ok.outcome is Outcome.SUCCESS and not ok.logs and not ok.error and ok.weight is None:
            plain.setdefault(ref.job_id, (i, ref, ok))
    for job_id in twice:  # acked twice in the batch: the general path lets the first win
        plain.pop(job_id, None)
    if not plain:
        return list(range(len(requests)))
    batch = [(ref.job_id, ref.fence, None if ok.result is None else database.to_json(ok.result)) for _, ref, ok in plain.values()]
    observed = transitions.active()
    completed = driver.complete_plain(
        database.conn(using), batch, conf.get().RETENTION_MS, random.randrange(throughput.SHARDS),
        details=observed,
    )
    if completed is None:
        return list(range(len(requests)))
    done, now = completed
    if observed:
        transitions.acked([(job, Outcome.SUCCESS, JobState.COMPLETED.value) for job in done.values()], now, using)
    for job_id in done:
        i, ref, _ = plain[job_id]
        replies[i] = AckReply(ref, state=JobState.COMPLETED.value, at=now)
    return [i for i, reply in enumerate(replies) if reply is None]


@database.store_transaction
def _ack_general(requests: Sequence[AckRequest], *, using: str | None = None) -> list[AckReply]:
    """Every ack the single statement does not cover, sharing one transaction: the plain
    successes batched (:func:`_complete_all`), the others through :func:`acks.apply`."""
    using = database.alias(using)
    replies: list[AckReply | None] = [None] * len(requests)
    checked: dict[int, tuple[LeaseRef, acks.Checked]] = {}
    for i, req in enumerate(requests):
        try:
            ref = leases.as_lease(req.lease)
            checked[i] = (ref, acks.check(req.outcome, req.error, req.delay_ms, req.logs, req.actual_weight, req.result))
        except InvalidEnvelope as exc:
            replies[i] = AckReply(None, error=exc)
    if not checked:
        return replies  # type: ignore[return-value]
    now = clock.now(using)
    rows = _lock({ref.job_id for ref, _ in checked.values()}, using)
    fast: list[tuple[int, _Row, acks.Checked]] = []
    slow: list[tuple[int, acks.Checked]] = []
    seen: set[str] = set()
    for i, (ref, ok) in checked.items():
        row = rows.get(ref.job_id)
        why = _refusal(ref, row, now, seen)
        if why is not None:
            replies[i] = AckReply(ref, error=LeaseRejected(why))
            continue
        seen.add(ref.job_id)
        if row is None:  # _refusal refuses a missing row: never reached
            raise LeaseRejected(f"job {ref.job_id} no longer exists")
        if _is_plain_success(row, ok):
            fast.append((i, row, ok))
        else:
            slow.append((i, ok))
    shared = acks.Shared(using, now)
    if slow:  # already locked: the ORM rows for the general transition code
        payload_free = Job.objects.using(using).defer("args", "kwargs", "meta", "checkpoint")
        jobs = payload_free.in_bulk([checked[i][0].job_id for i, _ in slow])
        shared.lock_buckets((jobs[checked[i][0].job_id], ok) for i, ok in slow)
        for i, ok in slow:
            replies[i] = AckReply(checked[i][0], state=acks.apply(jobs[checked[i][0].job_id], ok, now, using, shared), at=now)
    states = _complete_all(fast, now, using, shared.tally)
    shared.write()
    for (i, _, _), state in zip(fast, states):
        replies[i] = AckReply(checked[i][0], state=state, at=now)
    return replies  # type: ignore[return-value]


@dataclass
class _Row:
    """The columns of a locked job row that fencing and the batched completion read."""

    id: str
    task: str
    fence: int
    state: str
    lease_expires_at: datetime | None
    queue: str
    rate_class: str | None
    retention_ms: int | None
    attempt: int
    attempted_at: datetime | None
    run_at: datetime | None


def _lock(ids: set[str], using: str) -> dict[str, _Row]:
    """Lock the batch's job rows (by the driver: in id order where the engine locks rows)."""
    rows = drivers.for_alias(using).lock_acked(database.conn(using), sorted(ids))
    return {row[0]: _Row(*row) for row in rows}


def _refusal(ref: LeaseRef, job: _Row | None, now: datetime, seen: set[str]) -> str | None:
    """Why this lease may not write (``leases.refusal``, and no lease acks twice), or None."""
    if ref.job_id in seen:
        return f"job {ref.job_id}: acked twice in one batch; the first ack ended the lease"
    return leases.refusal(ref, job, now)


def _is_plain_success(job: _Row, ok: acks.Checked) -> bool:
    """A SUCCESS that needs no per-job transition code: batched."""
    return (
        ok.outcome is Outcome.SUCCESS and not ok.logs and not ok.error
        and (ok.weight is None or not job.rate_class)
    )


def _complete_all(
    done: list[tuple[int, _Row, acks.Checked]], now: datetime, using: str, tally: throughput.Tally
) -> list[str | None]:
    """running -> completed (or deleted at retention 0) for the batch, as
    :func:`decide.decide` decides each: results, runs and rows, a fixed number of
    statements whatever the batch size; counted into ``tally``. The new states, in order."""
    decided = [decide.decide(Outcome.SUCCESS, job, now) for _, job, _ in done]
    if not done:
        return []
    for _, job, _ in done:
        tally.add(job.queue, JobState.COMPLETED.value, job.attempted_at, job.run_at, now)
    transitions.acked([(job, ok.outcome, d.state) for (_, job, ok), d in zip(done, decided)], now, using)
    acks.delete_jobs([job.id for (_, job, _), d in zip(done, decided) if d.state is None], using)
    kept = [(job, ok, d) for (_, job, ok), d in zip(done, decided) if d.state is not None]
    if kept:
        driver, connection = drivers.for_alias(using), database.conn(using)
        driver.put_results(connection, [(job.id, d.attempt, job.fence, ok.result) for job, ok, d in kept if ok.result is not None], now)
        written = driver.complete_locked(connection, [(job.id, job.fence, d.expires_at) for job, _, d in kept], now)
        if written != len(kept):
            raise StoreError(f"{len(kept) - written} locked job rows changed under their lock")
    return [None if d.state is None else d.state.value for d in decided]
