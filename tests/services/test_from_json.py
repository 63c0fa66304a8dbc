"""``database.from_json`` decodes stored JSON text exactly as ``json.loads`` does (it skips the
decoder for empty values and calls its scanner directly for the rest)."""

from __future__ import annotations

import json

import pytest

from boson_django import database

SAME = ["[]", "{}", "null", "[1, 2]", '{"a": [1, {"b": null}]}', '"x"', "1.5", "true", " [1] ", "9" * 500]
BROKEN = ["", "{", "[1,]", "[1] x", "nope", "[" * 100_000]


@pytest.mark.parametrize("text", SAME)
def test_it_decodes_what_json_decodes(text):
    assert database.from_json(text) == json.loads(text)


@pytest.mark.parametrize("text", BROKEN)
def test_it_refuses_what_json_refuses_with_the_same_error(text):
    with pytest.raises((ValueError, RecursionError)) as expected:
        json.loads(text)
    with pytest.raises(expected.type):
        database.from_json(text)


def test_each_empty_value_is_a_new_object():
    first = database.from_json("[]")
    first.append(1)
    assert database.from_json("[]") == []


def test_values_already_decoded_pass_through():
    value = {"a": 1}
    assert database.from_json(value) is value
