"""Characters that do not show what they are: found in a line and in free text, named with
where they stand, and written as their escapes wherever text is shown."""

from __future__ import annotations

import pytest

from governor.domain.text import hidden, visible


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("plain name", None),
        ("naïve café 東京 \U0001f680", None),
        ("\ue000private", None),  # private use: shows as a glyph or a box
        (
            "ab\u202ec",
            "the invisible format character U+202E (RIGHT-TO-LEFT OVERRIDE) at character 2",
        ),
        ("\u2067x", "the invisible format character U+2067 (RIGHT-TO-LEFT ISOLATE) at character 0"),
        (
            "x\U000e0041",
            "the invisible format character U+E0041 (TAG LATIN CAPITAL LETTER A) at character 1",
        ),
        ("é\x85", "the control character U+0085 at character 1"),
        ("a\x7f", "the control character U+007F at character 1"),
        ("a\tb", "the control character U+0009 at character 1"),
        ("a\x00", "a NUL character (U+0000) at character 1"),
        ("\ud83d", "a lone surrogate (U+D83D, not valid Unicode) at character 0"),
        ("a\u2028", "the line separator U+2028 at character 1"),
        ("é\u2029", "the paragraph separator U+2029 at character 1"),
        ("a\u200db", "the invisible format character U+200D (ZERO WIDTH JOINER) at character 1"),
    ],
)
def test_a_line_refuses_every_character_that_hides_and_says_where(
    text: str, found: str | None
) -> None:
    problem = hidden(text)
    assert (None if problem is None else str(problem)) == found


def test_free_text_keeps_its_lines_and_the_joiners_but_not_the_rest() -> None:
    assert hidden("one\r\n\ttwo \U0001f468\u200d\U0001f469 \u0646\u200c\u0627", free=True) is None
    assert str(hidden("one\nt\u202ewo", free=True)) == (
        "the invisible format character U+202E (RIGHT-TO-LEFT OVERRIDE) at character 5"
    )
    assert hidden("a\u2028b", free=True) is not None
    assert hidden("a\x1bb", free=True) is not None


def test_visible_writes_each_hidden_character_as_its_escape() -> None:
    assert visible("ops\u202egpj.exe") == "ops\\u202egpj.exe"
    assert visible("\ufeffa\x1b[31m\x85") == "\\ufeffa\\u001b[31m\\u0085"
    assert visible("x\U000e0041") == "x\\U000e0041"
    assert visible("\ud83d") == "\\ud83d"
    shown = "line one\n\tline two \U0001f468\u200d\U0001f469 — fine"
    assert visible(shown) is shown  # nothing hidden: the text itself
    assert visible(visible("a\u2066b")) == visible("a\u2066b")
