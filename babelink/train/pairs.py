"""Training data for self-alignment pretraining (SAP) and task fine-tuning of the entity encoder.

- (name, concept) lists from a KB, filtered to reproduce 001 Tab. 3's synonym sets:
  `en_syn` (English names only), `{lang}_syn` (one language's names), `all_syn` (every language).
- The offline positive-pair list of 003 App. A.3: every pair of names sharing a concept, trimmed
  at random to `max_pairs_per_concept` (50) per concept for balance.
- Translation pairs as pseudo-classes (001 §2.2): each (English, foreign) pair is its own class
  of two names.
- Task fine-tuning pairs (003 App. A.3, fine-tuning): each training mention paired with the
  names of its gold concept.
"""

from __future__ import annotations

import itertools
import random
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from babelink.augment import mention_pairs
from babelink.errors import BabelinkError, InputFormatError
from babelink.formats.document import Document
from babelink.kb.base import KnowledgeBase
from babelink.lang import to_iso
from babelink.textio import iter_lines

MAX_PAIRS_PER_CONCEPT = 50  # 003 App. A.3


@dataclass(frozen=True, slots=True)
class PositivePair:
    """Two names of one class: a KB concept, or a translation pair's pseudo-class."""

    first: str
    second: str
    label: str


def synonym_names(kb: KnowledgeBase, synonyms: str = "all_syn") -> list[tuple[str, str]]:
    """Distinct (lower-cased name, concept id) pairs of the KB, for `all_syn`, `en_syn` or
    `{lang}_syn` (an ISO 639-1 or UMLS LAT code, e.g. `es_syn`). Names are lower-cased as in 003
    App. A.2, so case variants do not count as synonyms."""
    names = kb.names
    if synonyms != "all_syn":
        if not synonyms.endswith("_syn"):
            raise BabelinkError(f"synonym set must be all_syn, en_syn or <lang>_syn, got {synonyms!r}")
        lang = to_iso(synonyms.removesuffix("_syn"))
        names = names.filter(pc.equal(names.column("lang"), pa.scalar(lang)))
    pairs = zip(pc.utf8_lower(names.column("name")).to_pylist(), names.column("concept_id").to_pylist())
    return list(dict.fromkeys((" ".join(name.split()), concept) for name, concept in pairs if name.strip()))


def positive_pairs(
    names: Iterable[tuple[str, str]], max_pairs_per_concept: int = MAX_PAIRS_PER_CONCEPT, seed: int = 0
) -> list[PositivePair]:
    """All pairs of names sharing a label, at most `max_pairs_per_concept` (drawn with `seed`) each."""
    by_label: dict[str, list[str]] = defaultdict(list)
    for name, label in names:
        by_label[label].append(name)
    rng = random.Random(seed)
    pairs: list[PositivePair] = []
    for label, members in by_label.items():
        combinations = list(itertools.combinations(dict.fromkeys(members), 2))
        if len(combinations) > max_pairs_per_concept:
            combinations = rng.sample(combinations, max_pairs_per_concept)
        pairs.extend(PositivePair(first, second, label) for first, second in combinations)
    return pairs


def translation_pairs(path: str | Path) -> list[PositivePair]:
    """`english<TAB>foreign` lines (MUSE dictionaries) → one pseudo-class per distinct pair (001 §2.2).
    Identical strings (untranslated names, numbers) teach nothing and are skipped."""
    pairs: dict[tuple[str, str], None] = {}
    for number, line in iter_lines(path):
        fields = line.split("\t") if "\t" in line else line.split()
        if len(fields) != 2 or not all(field.strip() for field in fields):
            raise InputFormatError(str(path), number, "expected two columns: an English term and its translation")
        english, foreign = (" ".join(field.split()).lower() for field in fields)
        if english != foreign:
            pairs[(english, foreign)] = None
    if not pairs:
        raise BabelinkError(f"{path}: no translation pairs")
    name = Path(path).name
    return [PositivePair(english, foreign, f"{name}#{index}") for index, (english, foreign) in enumerate(pairs)]


def mention_names(
    documents: Iterable[Document], kb: KnowledgeBase, max_pairs_per_concept: int = MAX_PAIRS_PER_CONCEPT, seed: int = 0
) -> list[PositivePair]:
    """Task fine-tuning pairs: each distinct (mention, gold concept) with the concept's KB names,
    at most `max_pairs_per_concept` names per mention."""
    names_of: dict[str, list[str]] = defaultdict(list)
    for name, concept in synonym_names(kb):
        names_of[concept].append(name)
    rng = random.Random(seed)
    pairs = []
    for mention, concept in dict.fromkeys(mention_pairs(documents, kb)):
        mention = " ".join(mention.split()).lower()
        synonyms = [name for name in names_of[concept] if name != mention]
        if len(synonyms) > max_pairs_per_concept:
            synonyms = rng.sample(synonyms, max_pairs_per_concept)
        pairs.extend(PositivePair(mention, name, concept) for name in synonyms)
    return pairs


def sap_pairs(kb: KnowledgeBase | None, *, synonyms: str = "all_syn", mentions: Iterable[Document] | None = None,
              translations: Iterable[str | Path] = (), max_pairs_per_concept: int = MAX_PAIRS_PER_CONCEPT,
              seed: int = 0) -> list[PositivePair]:
    """The positive pairs of one SAP run: with `mentions`, task fine-tuning pairs of those
    annotated documents against `kb`; otherwise `kb`'s synonym pairs (none for `synonyms="none"`);
    plus each translation lexicon's pairs as pseudo-classes (001 §2.2)."""
    positives: list[PositivePair] = []
    if kb is not None and mentions is not None:
        positives += mention_names(mentions, kb, max_pairs_per_concept, seed)
    elif kb is not None and synonyms != "none":
        positives += positive_pairs(synonym_names(kb, synonyms), max_pairs_per_concept, seed)
    for path in translations:
        positives += translation_pairs(path)
    return positives
