"""A JSON body's nesting and the size of its collections, measured on its bytes before any
parser reads them: Python's parser recurses once per level and gives up (RecursionError)
near a thousand, and a body of a hundred thousand members costs its reader in proportion.

A body within bounds is told apart at C speed: it cannot nest deeper than it has `[` and `{`,
nor hold more members in one collection than it has commas, plus one. Only a body with more
of them is scanned exactly, its strings skipped (a bracket or comma in a string, or after an
escaped quote, is text), in about the time a parser takes to read it. A body that is not JSON
is measured at least as far as a parser reads it before it gives up.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

# A request body nests at most this deep: a JSON document inside it (`json_limits`) 8 levels,
# under the few levels of the request around it.
MAX_DEPTH = 16
# A request body's object or array holds at most this many members: more than any list a
# request takes (1,024 processes of a GPU) and than a 16 KiB document can hold.
MAX_MEMBERS = 8_192

_ESCAPE = re.compile(rb"\\[\s\S]")  # a backslash and what it escapes: inside a string
_NOT_STRUCTURE = bytes(set(range(256)) - set(b"[]{},"))
_INNERMOST = re.compile(rb"\[[^\[\]{}]*\]|\{[^\[\]{}]*\}")  # a collection and its commas


@dataclass(frozen=True)
class OutOfBounds:
    """What a body exceeds: its `code`, and a message for the client."""

    code: str
    message: str


TOO_DEEP = OutOfBounds("too_deep", f"the body nests deeper than {MAX_DEPTH} levels of JSON")
TOO_MANY = OutOfBounds(
    "too_many_members", f"an object or array of the body holds more than {MAX_MEMBERS} members"
)


def _walked(structure: bytes) -> OutOfBounds | None:
    """`structure` measured mark by mark, as a parser reads it, up to its first excess."""
    open_members = [0]  # the commas so far of each collection open at this point
    for mark in structure:
        if mark in b"[{":
            if len(open_members) > MAX_DEPTH:
                return TOO_DEEP
            open_members.append(0)
        elif mark == ord(","):
            open_members[-1] += 1
            if open_members[-1] >= MAX_MEMBERS:
                return TOO_MANY
        elif len(open_members) > 1:
            open_members.pop()
    return None


def _measured(text: bytes) -> OutOfBounds | None:
    """The brackets and commas of UTF-8 JSON `text` outside its strings; its collections
    then taken innermost first, a level at a time at C speed, each level's members counted as
    its commas. Only a body left with brackets after MAX_DEPTH levels, too deep or malformed,
    is walked mark by mark."""
    outside = b"".join(_ESCAPE.sub(b"", text).split(b'"')[::2])  # every other part a string
    structure = reduced = outside.translate(None, _NOT_STRUCTURE)
    for _ in range(MAX_DEPTH):
        innermost = _INNERMOST.findall(reduced)
        if not innermost:
            break
        if max(map(len, innermost)) - 1 > MAX_MEMBERS:  # its commas, and one
            return TOO_MANY
        reduced = _INNERMOST.sub(b"", reduced)
    return None if reduced.strip(b",") == b"" else _walked(structure)


def out_of_bounds(body: bytes) -> OutOfBounds | None:
    """What `body`, as JSON text, exceeds of MAX_DEPTH and MAX_MEMBERS, if anything."""
    # each `[`, `{` and `,` is one such byte in every encoding a JSON parser reads
    if body.count(b"[") + body.count(b"{") <= MAX_DEPTH and body.count(b",") < MAX_MEMBERS:
        return None
    encoding = json.detect_encoding(body)
    if encoding != "utf-8":
        try:
            body = body.decode(encoding, "surrogatepass").encode("utf-8", "surrogatepass")
        except UnicodeDecodeError:
            return None  # not JSON text: no parser reads a bracket of it
    return _measured(body)
