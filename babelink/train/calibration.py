"""A bundle's own calibrator: the `normalize` and `link` models of `retrieve.calibration` fitted on
annotated documents, for a bundle whose encoder, KB or languages the shipped calibrator was not
fitted on (it was, for the bundled encoder on open-umls and CTD MEDIC: BENCHMARKS.md).

`normalize` examples are every annotated mention's candidates, labelled right when the candidate
is one of the mention's gold concepts. `link` examples are the candidates of every span the
document linker proposes above a low cosine floor (`PROPOSAL_FLOOR`), labelled right when the
span is a gold mention of that concept; spans whose best concept is a modifier are left out, as
`link` leaves them out. Both are ranked uncalibrated, `LOOKAHEAD` candidates deeper than the
`TOP_K` whose rows are kept, as the linker ranks them when it calibrates (000 §4.4: a learned
keep/drop decision; 002 §6.2: thresholds).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import replace

import numpy as np

from babelink.augment import gold_resolver
from babelink.batching import batched
from babelink.errors import InvalidInputError
from babelink.eval.linking import in_kb_gold
from babelink.formats.document import Document
from babelink.link.documents import Proposal
from babelink.link.modifiers import is_modifier
from babelink.linker import Linker
from babelink.retrieve.calibration import LOOKAHEAD, Calibrator, Model, candidate_features
from babelink.text import holds_capitals, normalize_name

#: Candidates per example, as the shipped calibrator was fitted.
TOP_K = 5
#: Spans are proposed above this cosine, below every link floor worth choosing.
PROPOSAL_FLOOR = 0.80

Rows = tuple[np.ndarray, np.ndarray]  # one example's candidate features, and whether each is right


def normalize_rows(linker: Linker,
                   mentions: Iterable[tuple[str, Collection[str], str | None]]) -> Iterator[Rows | None]:
    """For each `(mention, gold ids, language)`, its candidates' feature rows and labels (None for
    a mention with nothing to search or no candidate); gold ids resolve through the KB's
    alternative ids, and a mention whose gold is not in the KB is a NIL example."""
    resolve, shares = gold_resolver(linker.bundle.kb), linker.bundle.scripts
    for batch in batched(mentions, 2048):
        texts = [normalize_name(mention) for mention, _, _ in batch]
        found = linker.generator.generate(texts, TOP_K + LOOKAHEAD, [holds_capitals(m) for m, _, _ in batch],
                                          [lang for _, _, lang in batch])
        for (_, gold, _), text, candidates in zip(batch, texts, found):
            if not text or not candidates:
                yield None
                continue
            resolved = {resolve(concept) for concept in gold} - {None}
            labels = np.asarray([c.concept_id in resolved for c in candidates[:TOP_K]], dtype=float)
            yield candidate_features(text, candidates, shares)[:TOP_K], labels


def link_proposals(linker: Linker, documents: Sequence[Document]) -> list[list[Proposal]]:
    """The document linker's proposals above `PROPOSAL_FLOOR`, uncalibrated, modifiers kept, per document."""
    params = replace(linker.link_params, link_threshold=PROPOSAL_FLOOR, min_probability=0.0,
                     modifier_types=frozenset(), top_k=TOP_K + LOOKAHEAD)
    proposer = replace(linker.documents, params=params, calibration=None)
    return [found for batch in batched(documents, 16) for found in proposer.proposals(batch)]


def link_rows(linker: Linker, documents: Sequence[Document], proposals: Sequence[Sequence[Proposal]]) -> list[Rows]:
    """Each proposal's candidate feature rows and labels, in proposal order."""
    gold, shares = in_kb_gold(documents, gold_resolver(linker.bundle.kb)), linker.bundle.scripts
    rows = []
    for document, found in zip(documents, proposals):
        for proposal in found:
            ids = gold.get((document.id, proposal.start, proposal.end), set())
            labels = np.asarray([c.concept_id in ids for c in proposal.candidates[:TOP_K]], dtype=float)
            rows.append((candidate_features(normalize_name(proposal.searched), proposal.candidates, shares)[:TOP_K],
                         labels))
    return rows


def fit_calibrator(linker: Linker, documents: Sequence[Document]) -> Calibrator:
    """Both models fitted on `documents`' annotations against `linker`'s bundle (with its
    lexicons, filters and link settings); `trained_on` records what they saw."""
    mentions = [(a.text, a.concept_ids, d.lang) for d in documents for a in d.annotations if a.concept_ids]
    if not mentions:
        raise InvalidInputError("the documents have no annotation with a concept id to learn from")
    normalize = [rows for rows in normalize_rows(linker, mentions) if rows is not None]
    proposals = link_proposals(linker, documents)
    types, modifiers = linker.documents.concept_types, linker.link_params.modifier_types
    kept = [not is_modifier(p.candidates[0].concept_id, types, modifiers) for found in proposals for p in found]
    link = [rows for rows, keep in zip(link_rows(linker, documents, proposals), kept) if keep]
    models = {kind: _fitted(kind, examples) for kind, examples in (("normalize", normalize), ("link", link))}
    languages = Counter(d.lang or "unknown" for d in documents)
    return Calibrator(models, {"documents": len(documents), "mentions": len(normalize), "spans": len(link),
                               "languages": dict(sorted(languages.items()))})


def _fitted(kind: str, examples: list[Rows]) -> Model:
    labels = np.concatenate([labels for _, labels in examples]) if examples else np.zeros(0)
    if labels.all() or not labels.any():
        raise InvalidInputError(f"the {kind} examples are all right or all wrong ({len(labels):,} candidates): "
                                "calibration needs both; give more or other annotated documents")
    return Model.fit(np.concatenate([features for features, _ in examples]), labels)
