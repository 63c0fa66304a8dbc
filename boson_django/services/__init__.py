"""The service layer: the only code that changes a job's state.

Every function here is one short transaction on the ``using`` database alias (default
``BOSON["DATABASE"]``), joining the caller's transaction when one is open. The
many-id controls (``cancel_jobs``, ``retry_jobs``, ``release_jobs``) are the exception
by design: one short transaction per chunk of ``control.CHUNK`` jobs.
"""

from boson_django.services.ack_batch import AckReply, AckRequest, ack, ack_many
from boson_django.services.admission import admit
from boson_django.services.buckets import bucket_tokens, delete_rate_limit, set_rate_limit
from boson_django.services.config import delete_task_config, set_task_config
from boson_django.services.control import (
    Controlled, cancel, cancel_jobs, release_jobs, release_quarantined, retry, retry_jobs,
)
from boson_django.services.duties import claim_duty, release_duty
from boson_django.services.enqueue import enqueue
from boson_django.services.inspection import (
    all_enqueued, count_runs_since, counts, errors, get_output, get_progress, get_result,
    job_state, list_jobs, list_runs, task_run_stats,
)
from boson_django.services.invariants import Problem, find_problems
from boson_django.services.leases import checkpoint, release, renew, write_output, write_progress
from boson_django.services.queues import delete_queue, pause_queue, reason_to_keep_queue, resume_queue
from boson_django.services.sweeps import evict_retained, promote_due, reclaim_expired
from boson_django.services.types import (
    AdmissionUnit, AttemptRecord, EnqueueResult, Envelope, JobInfo, JobOutput, JobProgress,
    JobResult, LeaseRef, Reclaimed, RunInfo,
)
from boson_django.states import JobState, Outcome

__all__ = [
    "AckReply", "AckRequest", "ack_many", "AdmissionUnit", "AttemptRecord", "EnqueueResult", "Envelope", "JobInfo", "JobOutput",
    "JobProgress", "JobResult", "JobState", "LeaseRef", "Outcome", "Reclaimed", "RunInfo",
    "ack", "admit", "all_enqueued", "bucket_tokens", "cancel", "cancel_jobs", "checkpoint", "Controlled", "claim_duty",
    "count_runs_since", "counts", "delete_queue", "delete_rate_limit", "delete_task_config", "enqueue", "find_problems",
    "Problem", "errors", "evict_retained", "get_output", "get_progress",
    "get_result", "job_state", "list_jobs", "list_runs", "pause_queue", "promote_due",
    "reason_to_keep_queue", "reclaim_expired", "release", "release_duty", "release_jobs", "release_quarantined", "renew",
    "resume_queue", "retry", "retry_jobs", "set_rate_limit", "set_task_config", "task_run_stats",
    "write_output", "write_progress",
]
