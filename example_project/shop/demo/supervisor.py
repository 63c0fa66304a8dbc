"""The demo's child processes: ``boson_worker`` processes (restarted when they die) and
the development server. Each gets its own session, so Ctrl-C reaches only the demo,
which then stops them gracefully with SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

MANAGE = str(Path(__file__).resolve().parents[2] / "manage.py")


@dataclass
class WorkerSpec:
    name: str
    queues: list[str]
    concurrency: int


#: Risky and long work get their own workers: a crash there hits nothing else.
WORKERS = [
    WorkerSpec("general-a", ["emails", "media", "partners", "maintenance"], 4),
    WorkerSpec("general-b", ["emails", "media", "partners", "maintenance"], 4),
    WorkerSpec("reports", ["reports"], 1),
    WorkerSpec("risky", ["risky"], 1),
]


@dataclass
class Child:
    spec: WorkerSpec
    generation: int
    popen: subprocess.Popen[bytes]

    @property
    def worker_id(self) -> str:
        return f"{self.spec.name}-{self.generation}"


@dataclass
class Supervisor:
    log_dir: Path
    children: dict[str, Child] = field(default_factory=dict)
    server: subprocess.Popen[bytes] | None = None
    events: list[str] = field(default_factory=list)

    def start_workers(self, specs: list[WorkerSpec] = WORKERS) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        for spec in specs:
            self._start(spec, 1)

    def _start(self, spec: WorkerSpec, generation: int) -> None:
        child_id = f"{spec.name}-{generation}"
        command = [sys.executable, MANAGE, "boson_worker", "--worker-id", child_id,
                   "--concurrency", str(spec.concurrency)]
        for queue in spec.queues:
            command += ["--queue", queue]
        env = dict(os.environ, BOSON_DEMO_ALLOW_CRASH="1", PYTHONUNBUFFERED="1")
        self.children[spec.name] = Child(spec, generation, self._spawn(command, env, f"worker-{spec.name}.log"))

    def _spawn(self, command: list[str], env: dict[str, str], log_name: str) -> subprocess.Popen[bytes]:
        with open(self.log_dir / log_name, "ab") as out:
            return subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)

    def alive_ids(self) -> set[str]:
        return {c.worker_id for c in self.children.values() if c.popen.poll() is None}

    def restart_dead(self) -> None:
        for child in list(self.children.values()):
            code = child.popen.poll()
            if code is None:
                continue
            how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
            self._start(child.spec, child.generation + 1)
            self.events.append(f"worker {child.worker_id} died ({how}); started {child.spec.name}-{child.generation + 1}")

    def kill(self, worker_id: str, why: str) -> bool:
        for child in self.children.values():
            if child.worker_id == worker_id and child.popen.poll() is None:
                child.popen.send_signal(signal.SIGKILL)
                child.popen.wait()
                self.events.append(f"SIGKILLed worker {worker_id}: {why}")
                return True
        return False

    def start_server(self, port: int) -> None:
        command = [sys.executable, MANAGE, "runserver", "--noreload", f"127.0.0.1:{port}"]
        self.server = self._spawn(command, dict(os.environ, PYTHONUNBUFFERED="1"), "runserver.log")

    def stop_all(self, timeout: float = 15.0) -> None:
        """SIGTERM everything (workers drain their jobs), then SIGKILL what is left."""
        procs = [c.popen for c in self.children.values()] + ([self.server] if self.server else [])
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
