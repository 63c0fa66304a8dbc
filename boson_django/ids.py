"""Time-ordered job ids (UUIDv7 layout), monotonic within a process."""

from __future__ import annotations

import os
import threading
import time

_lock = threading.Lock()
_last = [0, 0]  # [unix ms, sequence]
#: Random bytes from os.urandom, drawn a block at a time: one system call per 512 ids
#: instead of one per id (a bulk enqueue makes thousands). Emptied in a forked child, so
#: two processes never hand out the same bytes.
_pool = bytearray()
_BLOCK = 4096


def _forget_pool() -> None:
    _pool.clear()


os.register_at_fork(after_in_child=_forget_pool)


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
        if not _pool:
            _pool.extend(os.urandom(_BLOCK))
        rand = int.from_bytes(_pool[-8:], "big") & ((1 << 62) - 1)
        del _pool[-8:]
    text = f"{(ms << 80) | (0x7 << 76) | (seq << 64) | (0b10 << 62) | rand:032x}"
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"
