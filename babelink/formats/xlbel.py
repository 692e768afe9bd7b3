"""XL-BEL query files: `CUI[|CUI…]||mention` (v0.0) or `CUI[|CUI…]||mention||context` (v1.0)."""

from __future__ import annotations

import re
from pathlib import Path

from babelink.errors import InputFormatError
from babelink.formats.document import NormalizationQuery
from babelink.lang import to_iso
from babelink.textio import iter_lines

# `es_1k_test_query.txt` → "es"; the concatenated `all_…` files carry no single language.
_LANG_PREFIX = re.compile(r"^([a-z]{2})_")


def read_xlbel(path: str | Path, lang: str | None = None) -> list[NormalizationQuery]:
    """Read one XL-BEL file; `lang` defaults to the file name's language prefix.

    Several `|`-joined gold CUIs are alternatives. Ids are kept verbatim: a few are `CL…`/`CN…`
    or otherwise not UMLS CUIs, and can never be predicted correctly.
    """
    path = Path(path)
    if lang is None:
        prefix = _LANG_PREFIX.match(path.name)
        lang = prefix.group(1) if prefix else None
    else:
        lang = to_iso(lang)
    queries = []
    for number, line in iter_lines(path):
        if not line.strip():
            continue
        fields = line.split("||", 2)
        if len(fields) < 2:
            raise InputFormatError(path, number, "expected 'CUI[|CUI…]||mention[||context]'")
        gold_ids = tuple(cui.strip() for cui in fields[0].split("|") if cui.strip())
        mention = fields[1].strip()
        if not gold_ids or not mention:
            raise InputFormatError(path, number, "empty gold id or mention")
        context = fields[2] if len(fields) == 3 else None
        queries.append(NormalizationQuery(mention, gold_ids, lang=lang, context=context))
    return queries
