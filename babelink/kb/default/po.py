"""A gettext catalogue (.po) reader: the translations GNU Health ships for ICD-10 titles."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from itertools import chain

from babelink.errors import InputFormatError

_PO_LINE = re.compile(r'(msgctxt|msgid|msgid_plural|msgstr(?:\[\d+\])?)\s+(".*")$')
_PO_ESCAPE = re.compile(r"\\(.)")
_PO_ESCAPED = {"n": "\n", "t": "\t"}


def _po_string(quoted: str, path: str, number: int) -> str:
    if len(quoted) < 2 or not (quoted.startswith('"') and quoted.endswith('"')):
        raise InputFormatError(path, number, f"expected a quoted string, got {quoted[:60]!r}")
    return _PO_ESCAPE.sub(lambda match: _PO_ESCAPED.get(match.group(1), match.group(1)), quoted[1:-1])


def po_entries(lines: Iterable[tuple[int, str]], path: str) -> Iterator[tuple[str, str]]:
    """(msgctxt, msgstr) of each translated entry of a gettext catalogue; fuzzy and empty ones skipped."""
    entry: dict[str, str] = {}
    keyword: str | None = None
    fuzzy = False
    for number, raw in chain(lines, [(0, "")]):  # the empty line ends the last entry
        line = raw.strip()
        starts_next = line.startswith(("#", "msgctxt ", "msgid ")) and "msgstr" in entry
        if not line or starts_next:
            if entry.get("msgstr") and not fuzzy:
                yield entry.get("msgctxt", ""), entry["msgstr"]
            entry, keyword, fuzzy = {}, None, False
            if not line:
                continue
        if line.startswith("#"):
            fuzzy = fuzzy or (line.startswith("#,") and "fuzzy" in line)
        elif line.startswith('"') and keyword is not None:
            entry[keyword] += _po_string(line, path, number)
        elif match := _PO_LINE.match(line):
            keyword = match.group(1)
            entry[keyword] = _po_string(match.group(2), path, number)
        else:
            raise InputFormatError(path, number, f"unexpected line in a gettext catalogue: {line[:60]!r}")
