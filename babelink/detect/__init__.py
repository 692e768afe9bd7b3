"""Mention detection: running text → candidate spans with exact character offsets.

The default is span enumeration (`detect.spans`, 000 §4.2), filtered by the linker's
high-recall matcher. A `MentionDetector` (a learned tagger, 002 §4.2) replaces it: its spans
are ranked without the recall filter, and one that links to nothing confidently is searched
by its n-grams (002 §4.4.1).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class MentionDetector(Protocol):
    name: str  # reported as each mention's `detector`

    def detect(self, texts: Sequence[str]) -> list[list[tuple[int, int]]]:
        """(start, end) character spans of the mentions in each text."""
        ...
