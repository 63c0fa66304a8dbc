"""Real worker processes for the fault scenarios, and the small waits that coordinate them.

Workers run ``python -m django boson_worker`` with ``tests.faults.settings`` (the test
settings plus the fault tasks) on the database the test uses. Their log goes to a file
the test can wait on. Waits poll a file or a row with a bound -- coordination, never a
sleep standing in for time: time-dependent steps use the frozen store clock.
"""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

from django.db import connection

from boson_django import services
from boson_django.services import Envelope
from tests.concurrency.support import ROOT, subprocess_env
from tests.worker.conftest import wait_until

__all__ = ["Worker", "enqueue_many", "fault_env", "proxied_env", "wait_file", "wait_until", "ROOT"]


def fault_env(**extra: str) -> dict[str, str]:
    env = subprocess_env()
    env["DJANGO_SETTINGS_MODULE"] = "tests.faults.settings"
    env["PYTHONFAULTHANDLER"] = "1"  # a worker that will not exit dumps every thread's stack on SIGABRT
    env.update(extra)
    return env


def proxied_env(proxy: Any, **boson: Any) -> dict[str, str]:
    """A worker's environment with its database behind ``proxy`` and these ``BOSON`` keys."""
    import json

    return fault_env(BOSON_PG_HOST="127.0.0.1", BOSON_PG_PORT=str(proxy.port), BOSON_FAULT_SETTINGS=json.dumps(boson))


def wait_file(folder: pathlib.Path, name: str, timeout: float = 30.0) -> pathlib.Path:
    path = folder / name
    wait_until(path.exists, timeout, what=f"{name} to appear")
    return path


class Worker:
    """One ``boson_worker`` subprocess."""

    def __init__(self, folder: pathlib.Path, name: str, *args: str, env: dict[str, str] | None = None,
                 default_id: bool = False):
        self.name = name
        self.log = folder / f"{name}.log"
        named = [] if default_id else ["--worker-id", name]
        command = [sys.executable, "-m", "django", "boson_worker", "--poll-interval-ms", "50", *named, *args]
        with open(self.log, "w") as out:
            self.popen = subprocess.Popen(command, env=env or fault_env(), cwd=ROOT,
                                          stdout=out, stderr=subprocess.STDOUT)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def text(self) -> str:
        return self.log.read_text()

    def says(self, text: str) -> bool:
        return text in self.text()

    def wait_for_line(self, text: str, timeout: float = 30.0) -> None:
        wait_until(lambda: self.says(text) or self.popen.poll() is not None, timeout, what=f"{text!r} in {self.log.name}")
        assert self.says(text), self.text()

    def signal(self, sig: int) -> None:
        self.popen.send_signal(sig)

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGKILL)
        self.popen.wait(30)

    def exit_code(self, timeout: float = 60) -> int:
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{self.name} did not exit within {timeout:.0f} s:\n{self._stacks()}") from None
        finally:
            if self.popen.poll() is None:
                self.popen.kill()
                self.popen.wait(10)

    def _stacks(self, lines: int = 200) -> str:
        """The end of the log after SIGABRT made the stuck process write where each of its
        threads is (the fault workers run with faulthandler on)."""
        self.popen.send_signal(signal.SIGABRT)
        try:
            self.popen.wait(10)
        except subprocess.TimeoutExpired:
            pass
        return "\n".join(self.text().splitlines()[-lines:])

    def cleanup(self) -> None:
        if self.popen.poll() is None:
            try:
                os.kill(self.popen.pid, signal.SIGCONT)  # a stopped process cannot die of SIGKILL later
            except ProcessLookupError:
                pass
            self.popen.kill()
            self.popen.wait(10)


def enqueue_many(task: str, count: int, *, args: Sequence[Any] = (), **fields: Any) -> list[str]:
    """``count`` jobs of ``task`` in one all-or-nothing enqueue; their ids."""
    envelopes = [Envelope(task=task, args=list(args), kwargs={}, **fields) for _ in range(count)]
    return [r.id for r in services.enqueue(envelopes, unique=False)]


def is_postgres() -> bool:
    return connection.vendor == "postgresql"


def _seed() -> int:
    """The fault suite's seed: ``BOSON_FAULT_SEED`` (tests/conftest.py chooses one for the run
    and prints it in the summary) or a fresh one."""
    import random

    raw = os.environ.get("BOSON_FAULT_SEED")
    return int(raw) if raw else random.SystemRandom().randrange(2**32)


SEED = _seed()
