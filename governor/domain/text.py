"""Characters that do not show what they are, found in text and shown as what they are.

Text a person reads (a budget's, pod's or run's name, a reason) can be made to read as other
text by characters that draw nothing or move what follows: control characters (C0, DEL and
C1), format characters (Unicode category Cf: the bidirectional overrides and isolates such as
U+202E, zero-width spaces and joiners, U+FEFF, soft hyphens, tags), the line and paragraph
separators U+2028 and U+2029, and lone surrogates (not Unicode at all). A one-line field
refuses all of them; free text keeps tab, newline and carriage return, and the zero-width
joiner and non-joiner (U+200D, U+200C) that emoji and some scripts are written with.
Private-use and unassigned code points are taken: they show as a glyph or a box, and a later
version of Unicode assigns the latter.

Text the governor did not check itself (a provider's words, a row written to the database by
hand) is never refused where it is shown: `visible` writes each character free text refuses
as its escape, `\\u202e`.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_IN_FREE_TEXT = frozenset("\t\n\r\u200c\u200d")
# the same, among ASCII characters: what the scan of an all-ASCII text looks for
_ASCII_IN_A_LINE = re.compile(r"[\x00-\x1f\x7f]")
_ASCII_IN_TEXT = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


@dataclass(frozen=True)
class Hidden:
    """A character that does not show what it is, and where it stands in its text."""

    character: str
    at: int

    @property
    def code(self) -> str:
        return f"U+{ord(self.character):04X}"

    def __str__(self) -> str:
        category = unicodedata.category(self.character)
        name = unicodedata.name(self.character, "")
        named = f"{self.code} ({name})" if name else self.code
        if category == "Cs":
            what = f"a lone surrogate ({self.code}, not valid Unicode)"
        elif self.character == "\x00":
            what = "a NUL character (U+0000)"
        elif category == "Cc":
            what = f"the control character {self.code}"
        elif category == "Cf":
            what = f"the invisible format character {named}"
        else:
            what = f"the {'line' if category == 'Zl' else 'paragraph'} separator {self.code}"
        return f"{what} at character {self.at}"


def _refused(character: str, free: bool) -> bool:
    if free and character in _IN_FREE_TEXT:
        return False
    return unicodedata.category(character) in _HIDDEN


def hidden(text: str, *, free: bool = False) -> Hidden | None:
    """The first character of `text` that one line (or, `free`, free text) may not carry."""
    if text.isascii():  # the usual case, scanned at C speed
        found = (_ASCII_IN_TEXT if free else _ASCII_IN_A_LINE).search(text)
        return None if found is None else Hidden(found.group(), found.start())
    for at, character in enumerate(text):
        if _refused(character, free):
            return Hidden(character, at)
    return None


def _escape(character: str) -> str:
    code = ord(character)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def visible(text: str) -> str:
    """`text` with every character that free text refuses written as its escape (`\\u202e`),
    so that what is shown is what is there; text without one is returned as it is."""
    if hidden(text, free=True) is None:
        return text
    return "".join(_escape(c) if _refused(c, True) else c for c in text)
