"""Whether the suite runs in CI, where a missing tool fails a test instead of skipping it."""

from __future__ import annotations

import os


def in_ci() -> bool:
    """``CI`` set to anything but empty, 0, false or no (CI sets ``CI=true``)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")
