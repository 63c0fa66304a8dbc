"""Time-ordered job ids (UUIDv7 layout), monotonic within a process."""

from __future__ import annotations

import os
import struct
import threading
import time

_lock = threading.Lock()
_last = [0, 0]  # [unix ms, sequence]
#: 64-bit random numbers from os.urandom, drawn a block at a time: one system call per
#: 512 ids instead of one per id (a bulk enqueue makes thousands). Emptied in a forked
#: child, so two processes never hand out the same numbers.
_pool: list[int] = []
_BLOCK = 512
_RAND_B = (1 << 62) - 1


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
            _pool.extend(struct.unpack(f">{_BLOCK}Q", os.urandom(8 * _BLOCK)))
        rand = _pool.pop() & _RAND_B
    # ms | version 7 + sequence | variant 0b10 + top 14 random bits | low 48 random bits
    return f"{ms >> 16:08x}-{ms & 0xFFFF:04x}-{0x7000 | seq:04x}-{0x8000 | rand >> 48:04x}-{rand & 0xFFFF_FFFF_FFFF:012x}"
