"""What a session says on the terminal, as lines both entry points print alike.

The session's lines are composed once (:class:`Line` objects with a style,
:mod:`.sessionlines`); pytest writes them through its terminal reporter (colours,
sections), the ``evomemory`` command prints them. Text that came from a model, a
server or a data file is made inert on the way (escape and control characters
shown, not obeyed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..util.redaction import shown

Style = Literal["plain", "red", "green", "yellow"]


@dataclass(frozen=True)
class Line:
    text: str
    style: Style = "plain"
    bold: bool = False
    #: a section title (pytest draws it as ``=== title ===``), not a line of text
    section: bool = False

    @classmethod
    def of(cls, text: str, style: Style = "plain", *, bold: bool = False) -> Line:
        """A line of text that may quote what a model, server or file said."""
        return cls(shown(text), style, bold)


__all__ = ["Line", "Style"]
