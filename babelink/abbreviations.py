"""Abbreviations defined in a document, for linking their later uses ("… dystrophy (DMD) … DMD").

A short form such as "DMD" or "HPT" is ambiguous against a whole KB but defined in the text
that uses it, so linkers of biomedical literature resolve it first (BioSyn and SapBERT's NCBI
evaluation use Ab3P). The pairs come from the Schwartz–Hearst algorithm, as implemented by the
`abbreviations` package; a mention that is, or contains as a whole token, a defined short form
is searched with the long form in its place.
"""

from __future__ import annotations

import logging
import re
from functools import cache, lru_cache


@lru_cache(maxsize=256)  # the mentions of one document are usually resolved one after another
def abbreviation_map(text: str) -> dict[str, str]:
    """Short form → long form for the abbreviations a text defines (the most frequent definition
    when one is defined several times)."""
    if "(" not in text:
        return {}
    return _schwartz_hearst()(doc_text=text, most_common_definition=True)


@cache
def _schwartz_hearst():
    """The package's extractor. Importing it calls `logging.basicConfig(level=INFO)`, which would
    reconfigure the logging of every program using babelink, so the root logger is restored."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    from abbreviations.schwartz_hearst import extract_abbreviation_definition_pairs

    root.handlers[:], root.level = handlers, level
    logging.getLogger("abbreviations").setLevel(logging.WARNING)
    return extract_abbreviation_definition_pairs


def expand_abbreviations(mention: str, abbreviations: dict[str, str]) -> str:
    """`mention` with every whole-token short form of `abbreviations` replaced by its long form."""
    if not abbreviations:
        return mention
    if mention in abbreviations:
        return abbreviations[mention]
    pattern = _pattern(tuple(sorted(abbreviations, key=len, reverse=True)))
    return pattern.sub(lambda match: abbreviations[match.group(0)], mention)


@lru_cache(maxsize=256)
def _pattern(short_forms: tuple[str, ...]) -> re.Pattern:
    alternatives = "|".join(re.escape(form) for form in short_forms)
    return re.compile(rf"(?<![\w-])(?:{alternatives})(?![\w-])")
