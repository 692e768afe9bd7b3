"""What training annotations add to a bundle: a labeled-span index and dictionary fine-tuning.

- *Labeled-span index* (002 §6.2): every annotated span of the training documents, mapped to its
  most frequent concept, becomes a small index searched before the KB (`SwitchingGenerator`).
- *Dictionary fine-tuning* (DFT, 000 §4.5): the (mention, concept) pairs of R% of the training
  documents become extra KB names. The documents used are recorded, so the training code of a
  contextual filter (000 §4.4) trains on the others only, as 000 §5.4 does.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from babelink.errors import BabelinkError
from babelink.formats import read_documents
from babelink.formats.document import Document
from babelink.kb.base import NAME_SCHEMA, KnowledgeBase
from babelink.text import normalize_name

DFT_SOURCE = "DFT"  # `source` of the names dictionary fine-tuning adds
SPAN_SOURCE = "SPAN"


def gold_resolver(kb: KnowledgeBase) -> Callable[[str], str | None]:
    """Annotation ids → KB primary ids; a bare MeSH id (`D012345`, as in NCBI-disease) also tries `MESH:`."""

    def resolve(concept_id: str) -> str | None:
        return kb.resolve(concept_id) or (None if ":" in concept_id else kb.resolve(f"MESH:{concept_id}"))

    return resolve


def mention_pairs(documents: Iterable[Document], kb: KnowledgeBase) -> list[tuple[str, str]]:
    """(mention text, KB concept id) for every annotation whose ids resolve to the KB;
    a composite mention (several ids) gives one pair per id."""
    resolve = gold_resolver(kb)
    pairs = []
    for document in documents:
        for annotation in document.annotations:
            for concept_id in dict.fromkeys(filter(None, map(resolve, annotation.concept_ids))):
                pairs.append((annotation.text, concept_id))
    return pairs


def dft_split(documents: Sequence[Document], ratio: float, seed: int = 0) -> tuple[list[Document], list[Document]]:
    """(dictionary documents, the rest): a seeded draw of round(ratio · n) of the n document ids (000 §4.5).

    Documents are ordered by id before the draw, so the split does not depend on file order.
    Documents sharing an id (NCBI-disease's training file holds PMID 8528200 twice) go to the
    same side: the split, and `dft_documents.txt`, are by id.
    """
    if not 0.0 <= ratio <= 1.0:
        raise BabelinkError(f"--dft-ratio must be between 0 and 1, got {ratio}")
    ordered = sorted(documents, key=lambda document: document.id)
    ids = sorted({document.id for document in ordered})
    chosen = set(random.Random(seed).sample(ids, round(ratio * len(ids))))
    return [d for d in ordered if d.id in chosen], [d for d in ordered if d.id not in chosen]


@dataclass(frozen=True)
class DftRecord:
    """What dictionary fine-tuning took, kept in the bundle (`Bundle.dft_documents`)."""

    source: str
    ratio: float
    seed: int
    documents: tuple[str, ...]  # ids of the documents whose mentions became KB names
    pairs: int  # distinct (mention, concept) pairs added

    def summary(self) -> dict:
        return {"source": self.source, "ratio": self.ratio, "seed": self.seed,
                "documents": len(self.documents), "pairs": self.pairs}


def apply_dft(kb: KnowledgeBase, path: str | Path, ratio: float, seed: int = 0) -> tuple[KnowledgeBase, DftRecord]:
    """Dictionary fine-tuning (000 §4.5): the KB extended with the mentions of R% of the
    annotated documents in `path`, and the record of which documents those were."""
    dictionary, _ = dft_split(read_annotated(path), ratio, seed)
    pairs = list(dict.fromkeys(mention_pairs(dictionary, kb)))
    record = DftRecord(str(Path(path).absolute()), ratio, seed, tuple(d.id for d in dictionary), len(pairs))
    return extend_kb(kb, pairs), record


def extend_kb(kb: KnowledgeBase, pairs: Iterable[tuple[str, str]], source: str = DFT_SOURCE) -> KnowledgeBase:
    """The KB with each (mention, concept) pair added as a name of that concept (repeats once)."""
    unique = list(dict.fromkeys((" ".join(mention.split()), concept_id) for mention, concept_id in pairs))
    unique = [(mention, concept_id) for mention, concept_id in unique if mention]
    added = pa.table(
        {
            "concept_id": [concept_id for _, concept_id in unique],
            "name": [mention for mention, _ in unique],
            "lang": pa.nulls(len(unique), pa.string()),
            "source": [source] * len(unique),
            "term_type": ["MENTION"] * len(unique),
            "preferred": [False] * len(unique),
        },
        schema=NAME_SCHEMA,
    )
    return KnowledgeBase(pa.concat_tables([kb.names, added]), kb.concepts)


def span_kb(documents: Iterable[Document], kb: KnowledgeBase) -> KnowledgeBase:
    """A KB whose names are the annotated spans of `documents` that resolve to `kb`, each under
    its most frequent concept (002 §6.2); ties go to the concept seen first. Concepts keep the main
    KB's preferred names and ids."""
    counts: dict[str, Counter] = defaultdict(Counter)
    surface: dict[str, str] = {}
    for mention, concept_id in mention_pairs(documents, kb):
        key = normalize_name(mention)
        if key:
            counts[key][concept_id] += 1
            surface.setdefault(key, " ".join(mention.split()))
    if not counts:
        raise BabelinkError("no training annotation resolves to a concept of the KB; no labeled-span index to build")
    best = {key: counter.most_common(1)[0][0] for key, counter in counts.items()}
    spans = extend_kb(KnowledgeBase(kb.names.slice(0, 0), kb.concepts), ((surface[k], c) for k, c in best.items()),
                      source=SPAN_SOURCE)
    return spans.select_concepts(set(best.values()))


def read_annotated(path: str | Path) -> list[Document]:
    documents = list(read_documents(path))
    if not documents:
        raise BabelinkError(f"{path}: no annotated documents found")
    return documents
