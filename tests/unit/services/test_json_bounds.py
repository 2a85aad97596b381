"""A JSON body's nesting and its collections' sizes, measured before it is parsed: exactly at
the bounds, with brackets and commas inside strings and escapes, in every encoding a parser
reads, and as far as a parser would read a malformed one."""

from __future__ import annotations

import json

import pytest

from governor.services.security.json_bounds import (
    MAX_DEPTH,
    MAX_MEMBERS,
    TOO_DEEP,
    TOO_MANY,
    out_of_bounds,
)


def nested(depth: int, inner: str = "0") -> str:
    """`depth` arrays and objects inside each other, alternately."""
    text = inner
    for level in range(depth):
        text = f"[{text}]" if level % 2 else f'{{"k": {text}}}'
    return text


def test_a_body_as_deep_as_the_bound_passes_and_one_level_more_does_not() -> None:
    assert out_of_bounds(nested(MAX_DEPTH).encode()) is None
    assert out_of_bounds(nested(MAX_DEPTH + 1).encode()) == TOO_DEEP
    assert out_of_bounds(nested(1000).encode()) == TOO_DEEP


def test_deep_branches_beside_shallow_ones_are_measured_each() -> None:
    wide = ", ".join([nested(MAX_DEPTH - 1)] * 40)  # many brackets, none too deep
    assert out_of_bounds(f"[{wide}]".encode()) is None
    assert out_of_bounds(f"[{wide}, {nested(MAX_DEPTH)}]".encode()) == TOO_DEEP


def test_a_collection_as_large_as_the_bound_passes_and_one_member_more_does_not() -> None:
    assert out_of_bounds(json.dumps([0] * MAX_MEMBERS).encode()) is None
    assert out_of_bounds(json.dumps([0] * (MAX_MEMBERS + 1)).encode()) == TOO_MANY
    members = {f"k{i}": 0 for i in range(MAX_MEMBERS + 1)}
    assert out_of_bounds(json.dumps({"inner": members}).encode()) == TOO_MANY


def test_members_are_counted_per_collection_not_per_body() -> None:
    halves = [[0] * (MAX_MEMBERS // 2 + 10)] * 3  # more commas in all than the bound
    assert out_of_bounds(json.dumps(halves).encode()) is None


@pytest.mark.parametrize(
    "text",
    [
        '"' + "[{" * 1000 + '"',
        '{"k": "' + "," * (MAX_MEMBERS + 5) + '"}',
        '["a\\"' + "[" * 1000 + '"]',  # an escaped quote does not end the string
        '["a\\\\", "' + "[" * 1000 + '"]',  # an escaped backslash does not escape the quote
    ],
    ids=["brackets", "commas", "escaped-quote", "escaped-backslash"],
)
def test_brackets_and_commas_in_strings_are_text(text: str) -> None:
    json.loads(text)  # valid JSON
    assert out_of_bounds(text.encode()) is None


def test_a_bracket_after_an_escaped_backslash_and_its_quote_counts() -> None:
    assert out_of_bounds(('["a\\\\", ' + nested(MAX_DEPTH) + "]").encode()) == TOO_DEEP


@pytest.mark.parametrize("encoding", ["utf-8", "utf-16", "utf-16-le", "utf-32-be"])
def test_every_encoding_a_parser_reads_is_measured(encoding: str) -> None:
    deep = "[" * 1000 + "]" * 1000
    assert out_of_bounds(deep.encode(encoding)) == TOO_DEEP
    text = '["\u2222\u5b5b", ' + nested(MAX_DEPTH - 1) + "]"
    assert out_of_bounds(text.encode(encoding)) is None


@pytest.mark.parametrize(
    "text",
    ["[" * 1000, "[" * 1000 + '"unterminated', "[" * 1000 + "}" * 1000, "[1, tru" + "[" * 1000],
    ids=["unclosed", "then-a-string", "mismatched", "after-an-error"],
)
def test_a_malformed_body_is_measured_as_far_as_a_parser_reads(text: str) -> None:
    """Each is refused: a parser would recurse through its brackets before its error, or the
    excess lies after the error, where refusing it costs nothing."""
    assert out_of_bounds(text.encode()) == TOO_DEEP


def test_a_body_that_does_not_decode_is_left_to_the_parser() -> None:
    undecodable = ("[" * 100).encode("utf-16") + b"\x00"  # half a character at its end
    with pytest.raises(UnicodeDecodeError):
        json.loads(undecodable)
    assert out_of_bounds(undecodable) is None
