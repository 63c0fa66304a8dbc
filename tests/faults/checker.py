"""The checker every fault scenario ends with: nothing lost, nothing run twice at once.

``assert_sound(enqueued)`` runs one reclaim pass and then asserts, besides the store's own
``find_problems()`` (fences grow, no two claims overlap, attempt and crash accounting):

* every committed enqueue is terminal, quarantined, pending with a due time, or running
  under an unexpired lease -- never stranded, never lost (unless listed in ``may_be_gone``:
  deleted at ack or evicted);
* no job exists that the scenario never enqueued;
* at most one committed :class:`Effect` per job, written by the claim that completed it;
* two handler starts of one job overlap only if the earlier claim had ended -- acked,
  released, or reclaimed after its lease expired -- on the store clock by the time the
  later one started.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable

from boson_django import clock, services
from boson_django.models import Job, Run
from boson_django.states import PENDING, TERMINAL, JobState
from tests.testapp.models import Effect, StartMark

_DONE = {s.value for s in TERMINAL} | {JobState.QUARANTINED.value}
_WAITING = {s.value for s in PENDING} | {JobState.AVAILABLE.value}


def problems(enqueued: Iterable[str], *, may_be_gone: Iterable[str] = ()) -> list[str]:
    services.reclaim_expired(100_000)
    found = [str(p) for p in services.find_problems(stranded_after_ms=0)]
    known, gone_ok = set(enqueued), set(may_be_gone)
    jobs = {j["id"]: j for j in Job.objects.values("id", "state", "run_at", "lease_expires_at")}
    now = clock.now()
    found += [f"job {i} was never enqueued" for i in sorted(set(jobs) - known)]
    for job_id in sorted(known):
        job = jobs.get(job_id)
        if job is None:
            if job_id not in gone_ok:
                found.append(f"job {job_id} was lost (committed enqueue, row gone)")
        elif not _accounted(job, now):
            found.append(f"job {job_id} is stranded: {job['state']} (lease {job['lease_expires_at']}, now {now})")
    found += _effect_problems(jobs)
    found += _overlap_problems()
    return found


def _accounted(job: dict, now) -> bool:
    if job["state"] in _DONE:
        return True
    if job["state"] in _WAITING:
        return job["run_at"] is not None
    return job["state"] == JobState.RUNNING.value and job["lease_expires_at"] > now


def _effect_problems(jobs: dict) -> list[str]:
    found = []
    per_job = Counter(Effect.objects.values_list("job_id", flat=True))
    found += [f"job {j} has {n} committed effects" for j, n in sorted(per_job.items()) if n > 1]
    succeeded = set(Run.objects.filter(outcome="success").values_list("job_id", "fence"))
    for job_id, fence in Effect.objects.values_list("job_id", "fence"):
        if job_id in jobs and (job_id, fence) not in succeeded:
            found.append(f"job {job_id}: effect of fence {fence}, which did not complete it")
    return found


def _overlap_problems() -> list[str]:
    marks: dict[str, list[tuple[int, object]]] = defaultdict(list)
    for job_id, fence, at in StartMark.objects.values_list("job_id", "fence", "at"):
        marks[job_id].append((fence, at))
    ended = {(r["job_id"], r["fence"]): r["finished_at"] for r in Run.objects.values("job_id", "fence", "finished_at")}
    found = []
    for job_id, seen in marks.items():
        seen.sort(key=lambda m: m[0])
        for (f1, _), (f2, at2) in zip(seen, seen[1:]):
            if f1 == f2:
                found.append(f"job {job_id}: two handler starts under one fence {f1}")
            elif (job_id, f1) in ended and (ended[(job_id, f1)] is None or ended[(job_id, f1)] > at2):
                found.append(f"job {job_id}: fence {f2} started at {at2} while fence {f1} still held its lease")
    return found


def assert_sound(enqueued: Iterable[str], *, may_be_gone: Iterable[str] = ()) -> None:
    found = problems(enqueued, may_be_gone=may_be_gone)
    assert not found, "invariants broken:\n" + "\n".join(found[:40])


def effects_of(job_id: str) -> list[int]:
    return list(Effect.objects.filter(job_id=job_id).values_list("fence", flat=True))


def starts_of(job_id: str) -> list[int]:
    return sorted(StartMark.objects.filter(job_id=job_id).values_list("fence", flat=True))
