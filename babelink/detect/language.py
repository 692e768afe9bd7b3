"""A text's language: a character n-gram classifier first, its stop words where that is unsure.

Counting stop words (`stopwords.guess_from_stopwords`) misreads short texts: a title such as
"Etude électromyographique d'un cas de toxoplasmose." holds two or three stop words, and
stopwords-iso's long English list shares them with the Romance languages, so only 76% of QUAERO
dev's French titles and abstracts were read as French. py3langid (langid.py, Lui and Baldwin
2012: naive Bayes over byte n-grams, 97 languages, its model inside the PyPI package) reads the
words' spelling as well and gets 98% (BENCHMARKS.md). It chooses among the languages babelink
has stop words for, since a guess picks them; where its posterior is below `MIN_CONFIDENCE`
(a few words, a mention alone, a drug name), the stop words decide, and abstain without
evidence.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Sequence

import stopwordsiso

from babelink.detect.stopwords import guess_from_stopwords
from babelink.detect.tokenize import Token

#: The classifier's posterior below which the stop words decide instead: the point where it
#: gives the other languages together more weight than its best guess.
MIN_CONFIDENCE = 0.5
#: Characters of a text the classifier reads (a segment may hold 20,000).
GUESS_CHARS = 2_000


def guess_language(text: str, tokens: Sequence[Token], prefer: Collection[str] = ()) -> str | None:
    """The ISO 639-1 code of `text`'s language (`tokens` are its tokens, for the stop-word
    guess, which breaks its ties toward a language in `prefer`), or None without evidence."""
    language, confidence = _identifier().classify(text[:GUESS_CHARS])
    if confidence >= MIN_CONFIDENCE:
        return language
    return guess_from_stopwords(tokens, prefer)


@functools.cache
def _identifier():
    """py3langid's classifier with normalised posteriors, over the languages with stop words
    (loaded on first use: 0.9 s)."""
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    identifier.set_languages(sorted(set(stopwordsiso.langs()) & set(identifier.nb_classes)))
    return identifier
