"""Output of the ``boson_*`` commands that print (``boson_status``, ``boson_sweep``,
``boson_check``) when its reader goes away: ``boson_status | head``."""

from __future__ import annotations

import os
import sys

from django.core.management.base import BaseCommand

#: The status a command cut short by a closed pipe exits with: 128 + SIGPIPE, what a
#: shell reports for a tool that SIGPIPE ended (``yes | head``).
EXIT_BROKEN_PIPE = 141


class PrintingCommand(BaseCommand):
    """A command whose reader may stop reading. Python ignores SIGPIPE, so a write to a
    closed pipe raised BrokenPipeError: a traceback after the lines ``head`` showed, and
    status 1. Here the command ends quietly with :data:`EXIT_BROKEN_PIPE`."""

    def run_from_argv(self, argv: list[str]) -> None:
        try:
            try:
                super().run_from_argv(argv)
            finally:
                sys.stdout.flush()  # here, not at exit, where its error can no longer be caught
        except BrokenPipeError:
            # What is still buffered would be flushed at exit, and fail again.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
            raise SystemExit(EXIT_BROKEN_PIPE) from None
