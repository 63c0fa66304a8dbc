"""Time-ordered job ids (UUIDv7 layout), monotonic within a process."""

from __future__ import annotations

import os
import threading
import time
import uuid

_lock = threading.Lock()
_last = [0, 0]  # [unix ms, sequence]


def new_id() -> str:
    """A UUIDv7 string: 48-bit unix ms, then a 12-bit sequence, then 62 random bits."""
    with _lock:
        ms = time.time_ns() // 1_000_000
        if ms <= _last[0]:
            ms = _last[0]
            _last[1] += 1
            if _last[1] > 0xFFF:
                ms += 1
                _last[1] = 0
        else:
            _last[1] = 0
        _last[0] = ms
        seq = _last[1]
    rand = int.from_bytes(os.urandom(8), "big") & ((1 << 62) - 1)
    value = (ms << 80) | (0x7 << 76) | (seq << 64) | (0b10 << 62) | rand
    return str(uuid.UUID(int=value))
