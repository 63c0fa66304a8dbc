"""Job ids: UUIDv7 strings, increasing within a process, never repeated -- also across a
fork (the pool of random bits is not inherited)."""

from __future__ import annotations

import os
import uuid

import pytest

from boson_django import ids


def test_ids_are_increasing_uuid7_strings():
    made = [ids.new_id() for _ in range(5_000)]
    assert made == sorted(made) and len(set(made)) == len(made)
    for text in made[:600]:  # past one refill of the random pool
        parsed = uuid.UUID(text)
        assert str(parsed) == text and parsed.version == 7 and parsed.variant == uuid.RFC_4122


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")  # the fork is the point
def test_a_forked_child_does_not_reuse_the_parent_s_random_bits():
    ids.new_id()  # the pool is filled
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover -- the child
        os.write(write, ",".join(ids.new_id() for _ in range(20)).encode())
        os._exit(0)
    os.waitpid(pid, 0)
    child = os.read(read, 10_000).decode().split(",")
    parent = [ids.new_id() for _ in range(20)]
    assert not {c[-17:] for c in child} & {p[-17:] for p in parent}
