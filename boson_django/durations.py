"""One way to show a span of time to a person: the admin pages and ``boson_status`` agree."""

from __future__ import annotations

from datetime import timedelta


def duration(delta: timedelta) -> str:
    """``3d 4h``, ``5m 02s``, ``850 ms``: two units at most, so a column of them scans at a
    glance; the sign is the caller's to say ("in", "ago")."""
    ms = abs(delta.total_seconds()) * 1000
    if ms < 1000:
        return f"{ms:.0f} ms"
    s = int(ms // 1000)
    d, s = divmod(s, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    if d:
        return f"{d}d {h}h"
    if h:
        return f"{h}h {m:02d}m"
    return f"{m}m {s:02d}s" if m else f"{s}s"
