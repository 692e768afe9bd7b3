"""Translation knowledge: bilingual lexicons (`lexicon`), lexicons mined from a KB's own names in
several languages (`mining`), English renderings of mentions (`render`) and respelled cognates
(`cognates`)."""

from __future__ import annotations

from pathlib import Path

import pyarrow.compute as pc

from babelink.kb.base import KnowledgeBase
from babelink.text import normalize_name
from babelink.translate.lexicon import Lexicon, read_lexicons
from babelink.translate.render import Renderer, RenderParams

__all__ = ["ENGLISH_WORDS_FILE", "Lexicon", "RenderParams", "Renderer", "english_words", "load_english_words",
           "read_lexicons", "save_english_words"]

#: `english_words` of a bundle's KB, stored beside its lexicons: computing them took 0.4 s of every load.
ENGLISH_WORDS_FILE = "english_words.txt"


def english_words(kb: KnowledgeBase) -> frozenset[str]:
    """The normalised words of the KB's English names (and of names without a language, which
    custom vocabularies mostly write in English): words a rendering keeps as they are.

    `normalize_name` acts within whitespace-separated words, so the distinct raw words of the
    names are normalised rather than every name: a third of the work on every bundle load."""
    lang = kb.names.column("lang")
    english = kb.names.filter(pc.or_kleene(pc.equal(lang, "en"), pc.is_null(lang))).column("name")
    raw_words = pc.unique(pc.list_flatten(pc.utf8_split_whitespace(english))).to_pylist()
    return frozenset(word for raw in raw_words for word in normalize_name(raw).split())


def save_english_words(kb: KnowledgeBase, directory: Path) -> Path:
    path = directory / ENGLISH_WORDS_FILE
    path.write_text("".join(f"{word}\n" for word in sorted(english_words(kb))), encoding="utf-8")
    return path


def load_english_words(directory: Path) -> frozenset[str]:
    return frozenset((directory / ENGLISH_WORDS_FILE).read_text(encoding="utf-8").splitlines())
