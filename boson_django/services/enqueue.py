"""enqueue: validate a batch, then insert it in one transaction, all or nothing.

The decision -- each envelope checked and completed into a row
(:mod:`~boson_django.services.envelopes`), its initial state, what a held unique key
yields -- is made here once; the statements that write the rows are the engine driver's
(:mod:`boson_django.drivers.enqueue`). Where the driver enqueues one envelope outside any
transaction as one statement, a single envelope goes that way; everything else runs in a
store transaction that joins the caller's.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import DatabaseError, IntegrityError

from boson_django import database, drivers, tracing, transitions
from boson_django.drivers import Driver
from boson_django.drivers.enqueue import COLUMNS, Holder, Preflight
from boson_django.errors import DuplicateJobId, InvalidEnvelope
from boson_django.services import history, migrated, wakeups
from boson_django.services.preflight import explicit_ids, preflight, tasks_of
from boson_django.services.envelopes import POLICY_CHECKS, Checks, Policies, initial_state, numbered, policy_fingerprint
from boson_django.services.types import EnqueueResult, Envelope
from boson_django.states import JobState

__all__ = ["CHUNK", "POLICY_CHECKS", "Enqueued", "enqueue", "enqueue_one", "policy_fingerprint"]

#: The most rows one INSERT lists.
CHUNK = 500
#: How often a one-statement enqueue re-reads a TaskConfig row that changed under it
#: before it takes the transactional path instead.
_CONFIG_TRIES = 3


@dataclass(frozen=True)
class Enqueued:
    """One envelope's result and its row (as written, when ``created``)."""

    result: EnqueueResult
    values: dict[str, Any]


def enqueue(
    envelopes: Iterable[Envelope], *, unique: bool = True, using: str | None = None
) -> list[EnqueueResult]:
    """Insert jobs, all or nothing, joining the caller's transaction if there is one.

    Validates every envelope; a call that raises writes nothing (a batch streamed into a
    bulk load is rolled back with its transaction or savepoint). An explicit id that exists
    raises ``DuplicateJobId``. A ``unique_key`` held by a non-terminal job yields
    ``disposition="duplicate"`` with that job's id: decided by the database's partial
    unique index (``INSERT ... ON CONFLICT DO NOTHING``), so concurrent enqueues of one
    key make one job. ``unique=False`` enqueues without claiming the key.

    Idle workers of the queues that got available jobs are woken when it commits
    (:func:`wakeups.notify_at_commit`).
    """
    with tracing.enqueue_span(list(envelopes)) as batch:
        results, rows = _submit(batch, unique, database.alias(using))
        tracing.enqueued(rows)
        return results


def enqueue_one(envelope: Envelope, *, using: str | None = None) -> Enqueued:
    """:func:`enqueue` of one envelope, with its row (the Tasks backend builds its result
    from it)."""
    with tracing.enqueue_span([envelope]) as batch:
        results, rows = _submit(batch, True, database.alias(using))
        tracing.enqueued(rows)
    return Enqueued(results[0], rows[0])


def _submit(batch: list[Envelope], unique: bool, using: str) -> tuple[list[EnqueueResult], list[dict[str, Any]]]:
    """The batch inserted; ``StoreNotMigrated`` when it failed for want of boson's tables."""
    try:
        connection = database.conn(using)
        driver = drivers.for_connection(connection)
        if len(batch) == 1 and driver.enqueues_alone(connection):
            done = _enqueue_alone(batch[0], unique, using, connection, driver)
            if done is not None:
                return [done.result], [done.values]
        return _enqueue(batch, unique=unique, using=using)
    except DatabaseError as exc:
        migrated.refuse_unmigrated(using, exc)
        raise


def _enqueue_alone(env: Envelope, unique: bool, using: str, connection: Any, driver: Driver) -> Enqueued | None:
    """One envelope in one autocommit statement (:meth:`Driver.insert_alone`), which reads
    the clock, the task's TaskConfig row and the fingerprint's quarantine itself and sends
    the NOTIFY for the job it creates when it commits.

    The policy is first resolved assuming the task has no TaskConfig row. When the
    statement inserts nothing, the preflight tells why: an explicit id that exists raises;
    another TaskConfig row resolves the policy again and retries; a unique key's visible
    holder makes the duplicate. ``None`` (nothing written) sends the rest -- a quarantined
    fingerprint, whose job needs an attempt record, a holder not yet visible, a TaskConfig
    row that keeps changing, a default that fails its check (the TaskConfig row may
    override it) -- to the transactional path.
    """
    channel = wakeups.channel(connection)
    checked = Checks().check(env, None)
    task = checked["task"]
    assumed: dict[str, Any] | None = None
    for _ in range(_CONFIG_TRIES):
        try:
            values = Policies({} if assumed is None else {task: assumed}).resolve(checked, None, unique)
        except InvalidEnvelope:
            if assumed is None:
                return None
            raise
        inserted = driver.insert_alone(connection, values, assumed, channel)
        if inserted is not None:
            values.update(state=inserted.state, run_at=inserted.run_at, enqueued_at=inserted.enqueued_at)
            result = EnqueueResult(values["id"], "created")
            transitions.enqueued([values], [result], using)
            wakeups.notify_at_commit([values["queue"]], using, notified=channel is not None)
            return Enqueued(result, values)
        pre = preflight(driver, connection, {task}, {values["fingerprint"]}, [values["id"]], using)
        _refuse_duplicate_ids([values], pre.existing_id)
        if pre.parked:
            return None
        if pre.configs.get(task) == assumed:
            holder = driver.key_holders(connection, {values["unique_key"]}).get(values["unique_key"])
            return None if holder is None else Enqueued(EnqueueResult(holder, "duplicate"), values)
        assumed = pre.configs.get(task)
    return None


@database.store_transaction
def _enqueue(batch: list[Envelope], *, unique: bool, using: str) -> tuple[list[EnqueueResult], list[dict[str, Any]]]:
    if not batch:
        return [], []
    connection = database.conn(using)
    driver = drivers.for_connection(connection)
    if driver.copy_from is not None and len(batch) >= driver.copy_from:
        return _enqueue_copied(batch, unique, connection, driver, using)
    checks = Checks()
    checked = [checks.check(env, i) for i, env in numbered(batch)]
    tasks, fingerprints = {v["task"] for v in checked}, {v["fingerprint"] for v in checked}
    pre = preflight(driver, connection, tasks, fingerprints, explicit_ids(batch), using)
    fill = Policies(pre.configs)
    rows = [fill.resolve(values, i, unique) for i, values in numbered(checked)]
    _refuse_duplicate_ids(rows, pre.existing_id)
    for values in rows:
        values["state"] = initial_state(values, pre.now, pre.parked).value
        values["enqueued_at"] = pre.now
    results = _insert_all(rows, connection, driver)
    return _written(rows, results, pre.parked, pre.now, using)


def _enqueue_copied(
    batch: list[Envelope], unique: bool, connection: Any, driver: Driver, using: str
) -> tuple[list[EnqueueResult], list[dict[str, Any]]]:
    """A batch of ``driver.copy_from`` envelopes or more: each envelope is checked,
    completed and streamed into the bulk load in one pass (:func:`_keyless`), so the
    server inserts while Python checks. What needs every row waits for the end of the
    stream: a repeated or existing id raises (after every envelope was checked, as on
    the other paths), the quarantined fingerprints are read and park their rows; an error
    rolls the transaction back, loaded rows included."""
    pre = preflight(driver, connection, tasks_of(batch), (), explicit_ids(batch), using)
    rows: list[dict[str, Any]] = []
    copied = driver.copy_rows(connection, _keyless(batch, unique, pre, rows))
    _refuse_duplicate_ids(rows, pre.existing_id)
    parked = preflight(driver, connection, (), {values["fingerprint"] for values in rows}, (), using).parked
    moved = [values for values in rows if values["fingerprint"] in parked]
    for values in moved:
        values["state"] = JobState.QUARANTINED.value
    if written := [values["id"] for values in moved if values["id"] in copied]:
        driver.quarantine_copied(connection, written)  # nobody saw them otherwise: same transaction
    results = _insert_all(rows, connection, driver, copied)
    return _written(rows, results, parked, pre.now, using)


def _keyless(
    batch: list[Envelope], unique: bool, pre: Preflight, rows: list[dict[str, Any]]
) -> Iterator[dict[str, Any]]:
    """Check and complete each envelope into ``rows``; yield the rows to bulk-load:
    keyless, with an id not seen earlier in the batch, and none when an explicit id
    exists (those raise once the stream ends)."""
    checks, fill = Checks(), Policies(pre.configs)
    seen: set[str] = set()
    for i, env in numbered(batch):
        values = fill.resolve(checks.check(env, i), i, unique)
        values["state"] = initial_state(values, pre.now, {}).value
        values["enqueued_at"] = pre.now
        rows.append(values)
        if values["unique_key"] is None and values["id"] not in seen and pre.existing_id is None:
            yield values
        seen.add(values["id"])


def _written(
    rows: list[dict[str, Any]], results: list[EnqueueResult], parked: Mapping[str, Holder], now: datetime, using: str
) -> tuple[list[EnqueueResult], list[dict[str, Any]]]:
    """After the rows are in: attempt records of parked jobs, transition hooks, wake-ups."""
    _record_parked(rows, results, parked, now, using)
    transitions.enqueued(rows, results, using)
    wakeups.notify_at_commit(_available_queues(rows, results), using)
    return results, rows


def _available_queues(rows: list[dict[str, Any]], results: list[EnqueueResult]) -> Iterator[str]:
    """The queues that got a job a worker may start now (not a duplicate, scheduled or
    parked one); lazily: nothing is read when no worker is to be woken."""
    return (
        values["queue"] for values, result in zip(rows, results)
        if result.disposition == "created" and values["state"] == JobState.AVAILABLE.value
    )


def _insert_all(
    rows: list[dict[str, Any]], connection: Any, driver: Driver, copied: set[str] | None = None
) -> list[EnqueueResult]:
    """Insert the rows not ``copied`` already and the queue rows, then map skipped rows to
    the live job holding their key (retrying a vanished holder)."""
    queues = {values["queue"] for values in rows}
    created = set(copied or ())
    pending = [values for values in rows if values["id"] not in created] if created else rows
    if not pending:
        driver.ensure_queues(connection, queues)
        return [_result(values, created, {}) for values in rows]
    pending = _in_key_order(pending)
    size = min(CHUNK, driver.max_list(connection, each=len(COLUMNS)))
    for _ in range(10):
        for part in database.in_slices(pending, size):
            created |= driver.insert_jobs(connection, part, queues)
            queues = set()
        holders = driver.key_holders(connection, {v["unique_key"] for v in pending if v["id"] not in created})
        pending = [v for v in pending if v["id"] not in created and v["unique_key"] not in holders]
        if not pending:
            return [_result(values, created, holders) for values in rows]
    raise IntegrityError("unique_key holder kept vanishing; enqueue gave up after 10 tries")


def _in_key_order(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows with unique keys first, in key order: an insert waits on a key another
    uncommitted transaction inserted, so two batches sharing keys in different orders
    could deadlock. Stable, so the first of two rows with one key in a batch still wins;
    the results keep the caller's order."""
    return sorted(rows, key=lambda values: (values["unique_key"] is None, values["unique_key"] or ""))


def _result(values: dict[str, Any], created: set[str], holders: dict[str, str]) -> EnqueueResult:
    if values["id"] in created:
        return EnqueueResult(values["id"], "created")
    return EnqueueResult(holders[values["unique_key"]], "duplicate")


def _refuse_duplicate_ids(rows: Sequence[dict[str, Any]], existing: str | None) -> None:
    """``DuplicateJobId`` for an id twice in the batch, then for ``existing`` (one that the
    store holds already)."""
    seen: set[str] = set()
    for values in rows:
        if values["id"] in seen:
            raise DuplicateJobId(f"job id {values['id']!r} appears twice in the batch")
        seen.add(values["id"])
    if existing is not None:
        raise DuplicateJobId(f"job id {existing!r} already exists")


def _record_parked(
    rows: list[dict[str, Any]], results: list[EnqueueResult], parked: Mapping[str, Holder], now: datetime, using: str
) -> None:
    """A job parked by a quarantined fingerprint gets an attempt record saying why."""
    for values, result in zip(rows, results):
        if result.disposition == "created" and values["state"] == JobState.QUARANTINED.value:
            holder = parked[values["fingerprint"]]
            history.record(
                values, outcome="quarantined", now=now, using=using,
                error=f"boson_django.errors.JobQuarantined: fingerprint {holder.fingerprint} is quarantined (job {holder.job_id} "
                f"reached the crash limit); release it to run this job",
            )
