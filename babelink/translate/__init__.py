"""Translation knowledge: bilingual lexicons (`lexicon`) and English renderings of mentions (`render`)."""

from __future__ import annotations

import pyarrow.compute as pc

from babelink.kb.base import KnowledgeBase
from babelink.text import normalize_name
from babelink.translate.lexicon import Lexicon, read_lexicons
from babelink.translate.render import Renderer, RenderParams

__all__ = ["Lexicon", "RenderParams", "Renderer", "english_words", "read_lexicons"]


def english_words(kb: KnowledgeBase) -> frozenset[str]:
    """The normalised words of the KB's English names (and of names without a language, which
    custom vocabularies mostly write in English): words a rendering keeps as they are."""
    lang = kb.names.column("lang")
    english = kb.names.filter(pc.or_kleene(pc.equal(lang, "en"), pc.is_null(lang))).column("name")
    return frozenset(word for name in pc.unique(english).to_pylist() for word in normalize_name(name).split())
