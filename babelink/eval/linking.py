"""Scoring a `link` output against a gold corpus: what `babelink evaluate` reports.

The protocol is the benchmarks' (docs/ARCHITECTURE.md, *Evaluation protocol*), so a user's own
run reproduces a BENCHMARKS.md row: gold ids are resolved to the bundle KB's primary ids
(alternative ids, bare MeSH ids: `augment.gold_resolver`); a gold mention with no id in the KB
(NIL, or a concept the KB lacks) cannot be linked right and is left out of the linking scores,
while a prediction on its span still counts against precision. Detection scores every gold
mention, ids or not, against every predicted span.

Predictions and gold are checked against each other before anything is scored, because a
mismatch would otherwise read as a low score: every predicted document must be a gold one, each
predicted mention's text must be the gold document's text at its offsets, and predictions that
name the bundle that linked them must name the bundle given.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from babelink.augment import gold_resolver
from babelink.errors import InputFormatError
from babelink.eval.metrics import span_scores
from babelink.formats import read_documents
from babelink.formats.document import Annotation, Document
from babelink.kb.base import KnowledgeBase
from babelink.textio import iter_lines, json_line

#: The document infon that names the bundle which linked a document (BioC output; JSONL `provenance`).
BUNDLE_INFON = "babelink_bundle"
#: A brat output directory's record of the bundle and settings that linked it (`Linker.provenance` as JSON).
BRAT_PROVENANCE = "babelink-provenance.json"
_DETECTED = "mention"  # the one "concept" of every span in detection scores


@dataclass(frozen=True)
class Predictions:
    """Linked documents read back, and the documents the linker could not link (JSONL error records)."""

    documents: tuple[Document, ...]
    failed: tuple[str, ...] = ()


def read_predictions(path: str | Path) -> Predictions:
    """`babelink link` output in any of its formats: JSONL (`.jsonl`), BioC (`.xml`, `.json`), a brat
    directory, or PubTator; or another system's output in the last three."""
    path = Path(path)
    if path.suffix.lower() == ".jsonl":
        return _read_linked_jsonl(path)
    provenance = brat_provenance(path) if path.is_dir() else None
    infons = ((BUNDLE_INFON, provenance["bundle"]),) if provenance is not None else ()
    return Predictions(tuple(replace(document, infons=(*document.infons, *infons))
                             for document in read_documents(path)))


def brat_provenance(directory: Path) -> dict | None:
    """The provenance of the brat directory `directory`'s documents (`BRAT_PROVENANCE`), if it says."""
    try:
        provenance = json.loads((directory / BRAT_PROVENANCE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:
        raise InputFormatError(directory / BRAT_PROVENANCE, None,
                               f"not babelink's record of a bundle: {error}") from None
    if not isinstance(provenance, dict) or not isinstance(provenance.get("bundle"), str):
        raise InputFormatError(directory / BRAT_PROVENANCE, None, 'expected {"bundle": …} (a bundle provenance)')
    return provenance


def _read_linked_jsonl(path: Path) -> Predictions:
    documents, failed = [], []
    for number, line in iter_lines(path):
        if not line.strip():
            continue
        record = json_line(line, path, number)
        if not isinstance(record, dict) or not isinstance(record.get("id"), str):
            raise InputFormatError(path, number, 'expected a `babelink link` JSONL record: {"id", "mentions"}')
        if "error" in record:
            failed.append(record["id"])
            continue
        mentions = record.get("mentions")
        if not isinstance(mentions, list):
            raise InputFormatError(path, number, 'expected a "mentions" list')
        annotations = tuple(_linked_mention(mention, path, number) for mention in mentions)
        bundle = (record.get("provenance") or {}).get("bundle")
        infons = ((BUNDLE_INFON, bundle),) if isinstance(bundle, str) else ()
        documents.append(Document(record["id"], "", annotations, infons=infons, source=f"{path}:{number}"))
    return Predictions(tuple(documents), tuple(failed))


def _linked_mention(mention: object, path: Path, number: int) -> Annotation:
    fields = mention if isinstance(mention, dict) else {}
    start, end, text, concept = (fields.get(key) for key in ("start", "end", "text", "concept"))
    if not (_offset(start) and _offset(end) and isinstance(text, str) and isinstance(concept, str) and start < end):
        raise InputFormatError(path, number, 'every mention needs integer "start" < "end", a "text" and a '
                                             f'"concept" string; got {json.dumps(mention)[:200]}')
    return Annotation(start, end, text, (concept,))


def _offset(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def score_linking(predictions: Predictions, gold: Iterable[Document], kb: KnowledgeBase,
                  types: Collection[str] | None = None, *, bundle_id: str | None = None,
                  predicted_name: str = "predictions", gold_name: str = "gold") -> dict:
    """Strict and partial P/R/F1 of linking and of detection, overall and per document language
    (where the gold documents say theirs), with the counts behind them. Gold annotations are
    those of `types` when given. A predicted document that is not a gold one, a predicted
    mention whose text is not the gold text at its offsets, or predictions that name a bundle
    other than `bundle_id` raise `InputFormatError` naming the file and the document."""
    gold_documents = {document.id: _of_types(document, types) for document in gold}
    if not gold_documents:
        raise InputFormatError(gold_name, None, "no documents")
    _check(predictions.documents, gold_documents, bundle_id, predicted_name)
    resolve = gold_resolver(kb)
    spans = gold_spans(gold_documents.values(), resolve)
    if not any(spans.values()):
        raise InputFormatError(gold_name, None, "no gold mention has a concept id of this bundle's KB "
                                                "(is it the KB the corpus is annotated with?)")
    linked = {document.id for document in predictions.documents} | set(predictions.failed)
    languages = sorted({document.lang for document in gold_documents.values() if document.lang})
    return {
        "documents": {"gold": len(gold_documents), "predicted": len(predictions.documents),
                      "failed": len(predictions.failed), "missing": len(gold_documents.keys() - linked)},
        "mentions": {"gold": len(spans), "gold_in_kb": sum(bool(ids) for ids in spans.values()),
                     "predicted": sum(len(document.annotations) for document in predictions.documents)},
        **_scores(predictions.documents, spans, resolve),
        "by_language": {} if len(languages) < 2 else {
            lang: _scores([d for d in predictions.documents if gold_documents[d.id].lang == lang],
                          {span: ids for span, ids in spans.items() if gold_documents[span[0]].lang == lang}, resolve)
            for lang in languages},
    }


def _of_types(document: Document, types: Collection[str] | None) -> Document:
    if types is None:
        return document
    return replace(document, annotations=tuple(a for a in document.annotations if a.type in types))


def _check(predicted: Iterable[Document], gold: dict[str, Document], bundle_id: str | None, name: str) -> None:
    seen: set[str] = set()
    for document in predicted:
        where = document.source or name
        if document.id not in gold:
            raise InputFormatError(where, None, f"document {document.id!r} is not in the gold corpus: "
                                                "were these predictions made on it?")
        if document.id in seen:
            raise InputFormatError(where, None, f"document {document.id!r} is predicted twice")
        seen.add(document.id)
        linked_by = dict(document.infons).get(BUNDLE_INFON)
        if bundle_id is not None and linked_by is not None and linked_by != bundle_id:
            raise InputFormatError(where, None, f"document {document.id!r} was linked with bundle {linked_by}, "
                                                f"not with the given one ({bundle_id}): score against that bundle")
        text = gold[document.id].text
        for annotation in document.annotations:
            found = text[annotation.start:annotation.end]
            compared = annotation.text and not annotation.fragments  # a discontinuous mention's text is its pieces'
            if annotation.end > len(text) or (compared and found != annotation.text):
                raise InputFormatError(where, None, f"document {document.id!r}: the mention {annotation.text!r} at "
                                                    f"{annotation.start}-{annotation.end} is not the gold text there "
                                                    f"({found!r}): linked from another version of the text?")


def gold_spans(documents: Iterable[Document], resolve: Callable[[str], str | None]
               ) -> dict[tuple[str, int, int], frozenset[str]]:
    """(document id, start, end) of every gold mention → its ids in the KB (empty: NIL or out of KB);
    a span annotated twice is one mention with the ids of both."""
    spans: dict[tuple[str, int, int], set[str]] = {}
    for document in documents:
        for annotation in document.annotations:
            ids = spans.setdefault((document.id, annotation.start, annotation.end), set())
            ids.update(filter(None, map(resolve, annotation.concept_ids)))
    return {span: frozenset(ids) for span, ids in spans.items()}


def in_kb_gold(documents: Iterable[Document], resolve: Callable[[str], str | None],
               types: Collection[str] | None = None) -> dict[tuple[str, int, int], frozenset[str]]:
    """The gold mentions (of `types` when given) that name a concept of the KB: (document id,
    start, end) → their ids, as `gold_spans` reads them."""
    spans = gold_spans((_of_types(document, types) for document in documents), resolve)
    return {span: ids for span, ids in spans.items() if ids}


def _scores(predicted: Iterable[Document], gold: dict[tuple[str, int, int], frozenset[str]], resolve) -> dict:
    found = [(document.id, annotation) for document in predicted for annotation in document.annotations]
    return {
        "linking": span_scores(
            ((doc_id, a.start, a.end, resolve(a.concept_ids[0]) or a.concept_ids[0])
             for doc_id, a in found if a.concept_ids),
            ((*span, ids) for span, ids in gold.items() if ids)),
        "detection": span_scores(((doc_id, a.start, a.end, _DETECTED) for doc_id, a in found),
                                 ((*span, (_DETECTED,)) for span in gold)),
    }
