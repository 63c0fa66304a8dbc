"""How much more work this machine does with all its cores busy than with one process.

    python3 bench/machine_scaling.py [--seconds S] [--rounds R]

The four-process target of the scale drains assumes the cores add up: that four busy
processes get about twice the work of one done on two cores. On shared virtual machines
they may not (a busy neighbour core, cache and memory contention, the hypervisor), and
then no queue can meet the target there. This measures it with no database and no queue
at all: one process of pure Python work alone, then two and four of the same at once, in
turns (so the host's drift falls on each alike; one alone is measured before and after),
and prints the work the machine did with two and four against one alone, with the medians
over the rounds. ``bench/run.py`` runs it right before the scale drains and puts it in
their table beside the ratios.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import random
import statistics
import time

#: The work: dict and string operations over a working set of a few MB, like a worker
#: handling job rows, with no I/O and no locks shared between processes.
_ROWS = 50_000
_CHUNK = 2_000


def _work(seconds: float, start: multiprocessing.synchronize.Barrier, out: multiprocessing.Queue) -> None:
    rows = [{"id": str(i), "n": i, "s": "x" * (i % 50)} for i in range(_ROWS)]
    rng = random.Random(7)
    start.wait()  # every process has built its rows: the clocks start together
    deadline = time.perf_counter() + seconds
    chunks = 0
    while time.perf_counter() < deadline:
        for row in rng.sample(rows, _CHUNK):
            row["n"] = row["n"] + len(row["s"]) + int(row["id"][:1])
        chunks += 1
    out.put(chunks)


def work_done(processes: int, seconds: float) -> int:
    """Chunks of work ``processes`` processes did together in ``seconds``, started at once."""
    # spawned, not forked: the caller may have threads (a test run does), and a fork of a
    # threaded process may deadlock in the child; each child builds its rows before the barrier
    ctx = multiprocessing.get_context("spawn")
    start, out = ctx.Barrier(processes), ctx.Queue()
    procs = [ctx.Process(target=_work, args=(seconds, start, out)) for _ in range(processes)]
    for p in procs:
        p.start()
    total = sum(out.get() for _ in procs)
    for p in procs:
        p.join()
    return total


def measure(seconds: float = 1.5, rounds: int = 3, counts: tuple[int, ...] = (2, 4)) -> dict:
    """Per round, one process alone, each of ``counts`` at once, then one alone again; the
    work of each against the mean of the two alone (the host's speed drifts within a
    round: measured once, before, one round gave 2.41x for four on two cores)."""
    ratios: dict[str, list[float]] = {str(k): [] for k in counts}
    for _ in range(rounds):
        before = work_done(1, seconds)
        together = {k: work_done(k, seconds) for k in counts}
        alone = (before + work_done(1, seconds)) / 2
        for k in counts:
            ratios[str(k)].append(together[k] / max(alone, 1))
    return {"rounds": ratios, "median": {k: statistics.median(v) for k, v in ratios.items()}}


def summary_line(result: dict) -> str:
    """One line for the benchmark's log."""
    med = result["median"]
    shown = " / ".join(f"{med[k]:.2f}x" for k in med)
    return (f"this machine, pure Python with no database: {' / '.join(med)} busy processes do {shown} "
            "the work of one alone")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=1.5, help="each measurement's length")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    a = p.parse_args()
    result = measure(a.seconds, a.rounds)
    print(json.dumps(result) if a.json else summary_line(result))


if __name__ == "__main__":
    main()
