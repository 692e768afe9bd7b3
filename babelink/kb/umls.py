"""UMLS Metathesaurus reader: `MRCONSO.RRF` (optionally gzipped), plus `MRSTY.RRF` when present."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

from babelink.errors import InputFormatError
from babelink.kb.base import KnowledgeBase, KnowledgeBaseBuilder
from babelink.lang import to_iso
from babelink.textio import iter_lines

# Column positions in MRCONSO.RRF (UMLS Reference Manual, 3.3.4).
CUI, LAT, TS, STT, ISPREF, SAB, TTY, CODE, STR, SUPPRESS = 0, 1, 2, 4, 6, 11, 12, 13, 14, 16
MRCONSO_FIELDS = 18
MRSTY_FIELDS = 6
SUPPRESSED = frozenset({"O", "E", "Y"})


def read_umls(
    mrconso: str | Path,
    *,
    languages: frozenset[str] | None = None,
    sources: Collection[str] | None = None,
    term_types: Collection[str] | None = None,
    include_suppressed: bool = False,
    mrsty: str | Path | None = None,
) -> KnowledgeBase:
    """Stream `MRCONSO.RRF` into a KnowledgeBase keyed by CUI.

    Filters: `languages` (ISO codes, see `babelink.lang`), `sources` (SAB), `term_types` (TTY);
    suppressed atoms (SUPPRESS O/E/Y) are skipped unless asked for. A name is preferred when it is
    the concept's preferred form in its source (TS=P, STT=PF, ISPREF=Y). `mrsty` defaults to an
    `MRSTY.RRF` or `MRSTY.RRF.gz` beside `mrconso` and is optional: semantic types are added when it exists.
    """
    mrconso = Path(mrconso)
    sources = frozenset(sources) if sources else None
    term_types = frozenset(term_types) if term_types else None
    builder = KnowledgeBaseBuilder(languages=languages)
    for number, line in iter_lines(mrconso):
        if not line:
            continue
        fields = line.split("|")
        if len(fields) < MRCONSO_FIELDS:
            raise InputFormatError(
                mrconso, number, f"expected {MRCONSO_FIELDS} '|'-separated fields, found {len(fields)}"
            )
        cui, name = fields[CUI].strip(), fields[STR].strip()
        if not cui or not name:
            raise InputFormatError(mrconso, number, "empty CUI or STR field")
        if sources is not None and fields[SAB] not in sources:
            continue
        if term_types is not None and fields[TTY] not in term_types:
            continue
        if not include_suppressed and fields[SUPPRESS] in SUPPRESSED:
            continue
        builder.add_name(
            cui,
            name,
            lang=to_iso(fields[LAT]),
            source=fields[SAB],
            term_type=fields[TTY],
            preferred=fields[TS] == "P" and fields[STT] == "PF" and fields[ISPREF] == "Y",
        )
        builder.add_concept(cui, xrefs=(f"{fields[SAB]}:{fields[CODE]}",))
    if mrsty is None:  # gzipped or not, whichever MRCONSO is
        mrsty = next((path for name in ("MRSTY.RRF", "MRSTY.RRF.gz") if (path := mrconso.with_name(name)).exists()),
                     None)
    if mrsty is not None:
        _add_semantic_types(builder, Path(mrsty))
    return builder.build()


def _add_semantic_types(builder: KnowledgeBaseBuilder, mrsty: Path) -> None:
    """MRSTY.RRF rows `CUI|TUI|STN|STY|ATUI|CVF|` → semantic type names on the concepts."""
    for number, line in iter_lines(mrsty):
        if not line:
            continue
        fields = line.split("|")
        if len(fields) < MRSTY_FIELDS or not fields[0] or not fields[1]:
            raise InputFormatError(mrsty, number, f"expected {MRSTY_FIELDS} '|'-separated fields with CUI and TUI")
        builder.add_concept(fields[0], types=(fields[1],))
