"""Dense and hybrid bundles, index switching and dictionary fine-tuning, with a tiny random BERT."""

import json
import shutil
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pytest
from support import CountingEncoder

from babelink.augment import DFT_SOURCE, apply_dft, dft_split, mention_pairs, span_kb
from babelink.bundle.store import MANIFEST, build_bundle, load_bundle
from babelink.encoders.cache import CachedEncoder
from babelink.errors import BabelinkError, BundleError
from babelink.formats.document import Annotation, Document
from babelink.formats.pubtator import write_pubtator
from babelink.index.dense import DenseParams, StoredNameVectors
from babelink.kb.base import KnowledgeBase, KnowledgeBaseBuilder
from babelink.linker import Linker
from babelink.retrieve.candidate import Candidate
from babelink.retrieve.generators import HybridParams
from babelink.retrieve.switching import SwitchingGenerator


@pytest.fixture(scope="module")
def kb():
    builder = KnowledgeBaseBuilder()
    for concept_id, names in {
        "MESH:D009203": ["Myocardial infarction", "Heart attack", "Infarto de miocardio"],
        "MESH:D003920": ["Diabetes mellitus", "Diabetes"],
        "MESH:D001249": ["Asthma", "Asma"],
        "MESH:D006973": ["Hypertension", "High blood pressure"],
    }.items():
        for position, name in enumerate(names):
            builder.add_name(concept_id, name, preferred=position == 0)
    builder.add_concept("MESH:D003920", alt_ids=["OMIM:125853"])
    return builder.build()


def _document(doc_id: str, *mentions: tuple[str, str]) -> Document:
    text = " ; ".join(mention for mention, _ in mentions)
    annotations, start = [], 0
    for mention, concept_id in mentions:
        annotations.append(Annotation(start, start + len(mention), mention, (concept_id,), "Disease"))
        start += len(mention) + 3
    return Document(doc_id, text, tuple(annotations))


DOCUMENTS = [
    _document("1", ("MI", "D009203"), ("DM", "D003920")),
    _document("2", ("MI", "D009203"), ("BA", "D001249")),
    _document("3", ("MI", "D006973"), ("HTN", "D006973")),
    _document("4", ("NIDDM", "OMIM:125853"), ("unknown thing", "D999999")),
]


def test_hybrid_bundle_fuses_both_scores(kb, tiny_encoder_dir, tmp_path):
    params = HybridParams(dense_weight=0.3, pool=8)
    path = build_bundle(kb, tmp_path / "b", retriever="hybrid", encoder=tiny_encoder_dir, hybrid_params=params)
    bundle = load_bundle(path)
    assert bundle.manifest["hybrid"] == {"dense_weight": 0.3, "pool": 8, "screening_pool": 12}
    assert bundle.manifest["dense"]["encoder"]["name"] == str(tiny_encoder_dir)
    assert len(bundle.dense) == len(bundle.names)
    candidates = Linker(bundle).normalize("diabetes melitus", top_k=4)
    assert candidates[0].concept_id == "MESH:D003920"
    for c in candidates:
        assert c.score == pytest.approx(0.3 * c.dense_score + 0.7 * c.sparse_score, abs=1e-6)
    assert [c.score for c in candidates] == sorted((c.score for c in candidates), reverse=True)
    assert set(candidates[0].to_dict()) == {"id", "name", "matched_name", "score", "probability", "sparse_score",
                                            "dense_score", "codes"}
    assert candidates[0].to_dict()["codes"] == {"MESH": "D003920"}


def test_dense_bundle_ranks_by_encoder_cosine(kb, tiny_encoder_dir, tmp_path):
    bundle = load_bundle(build_bundle(kb, tmp_path / "b", retriever="dense", encoder=tiny_encoder_dir))
    assert "hybrid" not in bundle.manifest
    [top] = Linker(bundle).normalize("Heart attack", top_k=1)
    assert (top.concept_id, top.dense_score) == ("MESH:D009203", pytest.approx(1.0, abs=1e-5))


@pytest.mark.parametrize("kind", ["flat", "hnsw"])
def test_a_query_written_as_a_kb_name_takes_its_stored_vector(kb, tiny_encoder_dir, tmp_path, kind):
    bundle = load_bundle(build_bundle(kb, tmp_path / "b", retriever="hybrid", encoder=tiny_encoder_dir,
                                      dense_params=DenseParams(kind=kind)))
    counting = CountingEncoder(bundle.encoder())
    stored, fresh = Linker(bundle, encoder=counting), Linker(bundle, encoder=CachedEncoder(bundle.encoder()))
    queries = ["Heart attack", "infarto de miocardio", "heart atack", "ASMA"]
    for ours, theirs in zip(stored.normalize(queries, top_k=3), fresh.normalize(queries, top_k=3)):
        assert [c.concept_id for c in ours] == [c.concept_id for c in theirs]
        assert [c.score for c in ours] == pytest.approx([c.score for c in theirs], abs=1e-5)
    assert counting.texts == ["heart atack"]  # the other three are KB names once normalised
    found, vectors = StoredNameVectors(bundle.names, bundle.dense).find(["nope", "asthma", "asma"])
    assert found.tolist() == [1, 2]
    np.testing.assert_allclose(vectors, bundle.encoder().encode(["asthma", "asma"]), atol=1e-5)


def test_bundle_refuses_a_different_encoder_checkpoint(kb, tiny_encoder_dir, tmp_path):
    checkpoint = tmp_path / "encoder"
    shutil.copytree(tiny_encoder_dir, checkpoint)
    bundle = load_bundle(build_bundle(kb, tmp_path / "b", retriever="dense", encoder=checkpoint))
    import torch
    from transformers import AutoModel

    model = AutoModel.from_pretrained(checkpoint)
    with torch.no_grad():
        model.embeddings.word_embeddings.weight.mul_(2.0)
    model.save_pretrained(checkpoint)
    with pytest.raises(BundleError, match="not the checkpoint this bundle was built with"):
        bundle.encoder()
    shutil.rmtree(checkpoint)
    with pytest.raises(BabelinkError, match="not a transformers checkpoint"):
        bundle.encoder()


def test_dense_index_count_mismatch_is_an_error(kb, tiny_encoder_dir, tmp_path):
    path = build_bundle(kb, tmp_path / "b", retriever="dense", encoder=tiny_encoder_dir)
    small = build_bundle(
        kb.select_concepts(["MESH:D001249"]), tmp_path / "s", retriever="dense", encoder=tiny_encoder_dir
    )
    shutil.copy(small / "dense" / "faiss.index", path / "dense" / "faiss.index")
    with pytest.raises(BundleError, match="faiss.index is .* bytes, the manifest says"):
        load_bundle(path)
    manifest = json.loads((path / MANIFEST).read_text())  # a manifest that lists the swapped file's size
    manifest["sizes"]["dense/faiss.index"] = (path / "dense" / "faiss.index").stat().st_size
    (path / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(BundleError, match="dense index has 2 vectors for 9 name strings"):
        load_bundle(path)


def test_span_kb_keeps_the_most_frequent_concept(kb):
    pairs = mention_pairs(DOCUMENTS, kb)
    assert ("NIDDM", "MESH:D003920") in pairs  # alternative id resolved
    assert all(concept != "MESH:D999999" for _, concept in pairs)  # not in the KB: left out
    spans = span_kb(DOCUMENTS, kb)
    names = dict(zip(spans.names.column("name").to_pylist(), spans.names.column("concept_id").to_pylist()))
    assert names == {"MI": "MESH:D009203", "DM": "MESH:D003920", "BA": "MESH:D001249", "HTN": "MESH:D006973",
                     "NIDDM": "MESH:D003920"}
    assert spans.preferred_name("MESH:D009203") == "Myocardial infarction"
    with pytest.raises(BabelinkError, match="no training annotation"):
        span_kb([], kb)


@pytest.mark.parametrize("retriever", ["sparse", "hybrid"])
def test_index_switching_prefers_confident_labeled_spans(kb, tiny_encoder_dir, tmp_path, retriever):
    spans = span_kb(DOCUMENTS, kb)
    # the random tiny encoder ranks nothing sensibly: let the sparse cosine rank
    path = build_bundle(kb, tmp_path / "b", retriever=retriever, encoder=tiny_encoder_dir, spans=spans,
                        switch_threshold=0.95, hybrid_params=HybridParams(dense_weight=0.1))
    bundle = load_bundle(path)
    assert bundle.manifest["spans"]["names"] == 5 and bundle.spans.kb.num_names == 5
    linker = Linker(bundle)
    mi, asthma = linker.normalize(["MI", "asthma"], top_k=3)
    assert (mi[0].concept_id, mi[0].index, mi[0].matched_name) == ("MESH:D009203", "spans", "MI")
    assert mi[0].to_dict()["index"] == "spans"
    assert len({c.concept_id for c in mi}) == len(mi) >= 2  # the KB fills the rest, without repeats
    assert asthma[0].concept_id == "MESH:D001249" and asthma[0].index == "kb"  # no confident span
    never = Linker(bundle)
    never.generator.threshold = 2.0  # a threshold no score reaches: the KB alone answers
    assert [replace(c, probability=None) for c in never.normalize("MI", top_k=3)] == never.generator.kb.generate(
        ["mi"], 3)[0]


class _Fixed:
    """A generator answering every mention with the same ranked candidates."""

    def __init__(self, *scored: tuple[str, float]):
        self.candidates = [Candidate(concept_id, concept_id, concept_id, score) for concept_id, score in scored]

    def generate(self, mentions, top_k, capitals=None, langs=None):
        return [self.candidates[:top_k] for _ in mentions]


def test_a_confident_span_yields_to_a_better_kb_match():
    spans = _Fixed(("SPAN", 0.98), ("SPAN2", 0.90))
    beaten = SwitchingGenerator(spans, _Fixed(("KB", 0.99), ("SPAN", 0.80)), threshold=0.97)
    assert [(c.concept_id, c.index) for c in beaten.generate(["m"], 3)[0]] == [("KB", "kb"), ("SPAN", "kb")]
    tied = SwitchingGenerator(spans, _Fixed(("KB", 0.98)), threshold=0.97)
    assert [(c.concept_id, c.index) for c in tied.generate(["m"], 3)[0]] == [("SPAN", "spans"), ("KB", "kb")]
    below = SwitchingGenerator(spans, _Fixed(("KB", 0.5)), threshold=0.99)
    assert [c.concept_id for c in below.generate(["m"], 3)[0]] == ["KB"]
    empty_kb = SwitchingGenerator(spans, _Fixed(), threshold=0.97)
    assert [c.concept_id for c in empty_kb.generate(["m"], 3)[0]] == ["SPAN"]


def test_dft_split_is_seeded_and_independent_of_order():
    first, rest = dft_split(DOCUMENTS, 0.5, seed=1)
    again, _ = dft_split(list(reversed(DOCUMENTS)), 0.5, seed=1)
    assert len(first) == 2 and [d.id for d in first] == [d.id for d in again]
    assert sorted(d.id for d in first + rest) == ["1", "2", "3", "4"]
    assert dft_split(DOCUMENTS, 0.0)[0] == [] and len(dft_split(DOCUMENTS, 1.0)[0]) == 4
    with pytest.raises(BabelinkError, match="between 0 and 1"):
        dft_split(DOCUMENTS, 1.5)
    twice = DOCUMENTS[:1] * 2 + DOCUMENTS[1:]
    for ratio in (0.25, 0.75):
        chosen, rest = dft_split(twice, ratio, seed=1)
        assert len(chosen) + len(rest) == 5 and not {d.id for d in chosen} & {d.id for d in rest}, (
            "a repeated id stays on one side"
        )


def test_dft_adds_mentions_as_names_and_records_the_documents(kb, tmp_path):
    train = tmp_path / "train.pubtator"
    with open(train, "w") as stream:
        write_pubtator(DOCUMENTS, stream)
    extended, record = apply_dft(kb, train, ratio=0.5, seed=3)
    chosen = {d.id for d in dft_split(DOCUMENTS, 0.5, seed=3)[0]}
    assert set(record.documents) == chosen
    added = extended.names.filter(np.array(extended.names.column("source").to_pylist()) == DFT_SOURCE)
    expected = {(a.text, c) for d in DOCUMENTS if d.id in chosen for a, c in
                [(a, c) for a in d.annotations for c in a.concept_ids]}
    assert record.pairs == added.num_rows <= len(expected)
    path = build_bundle(extended, tmp_path / "b", retriever="sparse", dft=record)
    bundle = load_bundle(path)
    assert set(bundle.dft_documents()) == chosen
    assert bundle.manifest["dft"] == {
        "source": str(train),
        "ratio": 0.5,
        "seed": 3,
        "documents": 2,
        "pairs": record.pairs,
    }
    assert json.loads((path / MANIFEST).read_text())["files"]["dft_documents.txt"]
    assert load_bundle(build_bundle(kb, tmp_path / "plain", retriever="sparse")).dft_documents() == []


def test_ngram_search_links_the_parts_of_an_unmatched_mention(kb, tmp_path):
    builder = KnowledgeBaseBuilder()
    builder.add_name("MESH:D010146", "Severe pain and discomfort")  # "severe" and "and" are in the TF-IDF vocabulary
    pain = builder.build()
    both = KnowledgeBase(pa.concat_tables([kb.names, pain.names]), pa.concat_tables([kb.concepts, pain.concepts]))
    linker = Linker(load_bundle(build_bundle(both, tmp_path / "b", retriever="sparse")))
    mention = "severe diabetes mellitus and high blood pressure"
    parts = _answer(linker, mention, top_k=1).parts
    assert [(p.text, p.candidates[0].concept_id) for p in parts] == [
        ("diabetes mellitus", "MESH:D003920"), ("high blood pressure", "MESH:D006973")]
    assert all(mention[p.start : p.end] == p.text for p in parts)
    assert all(len(p.candidates) == 1 and p.candidates[0].probability is not None for p in parts)  # calibrated
    asthma = _answer(linker, "Asthma")
    assert asthma.parts is None and asthma.candidates[0].concept_id == "MESH:D001249"  # above the threshold
    assert _answer(linker, "zzz qqq").parts == []


def test_ngram_search_reads_scripts_without_spaces_and_stops_at_punctuation(tmp_path):
    builder = KnowledgeBaseBuilder()
    for concept_id, name, lang in (("D1", "糖尿病", "zh"), ("D2", "高血压", "zh"), ("D3", "pain", "en"),
                                   ("D4", "pain relief", "en")):
        builder.add_name(concept_id, name, lang=lang)
    linker = Linker(load_bundle(build_bundle(builder.build(), tmp_path / "b", retriever="sparse")))
    mention = "糖尿病和高血压"
    parts = _answer(linker, mention, top_k=1, lang="zh").parts
    assert [(p.start, p.end, p.text, p.candidates[0].concept_id) for p in parts] == [
        (0, 3, "糖尿病", "D1"), (4, 7, "高血压", "D2")]
    # "pain. Relief came" holds no mention of "pain relief": the full stop is a barrier
    assert [p.text for p in _answer(linker, "pain. Relief came").parts] == ["pain"]


def test_ngram_search_edges_its_ngrams_as_spans_are_edged(tmp_path):
    builder = KnowledgeBaseBuilder()
    for number, name in enumerate(["Hepatitis A", "Vitamin A", "Influenza A", "Blood group A", "Asthma", "ALL"]):
        builder.add_name(f"D{number}", name, lang="en")
    linker = Linker(load_bundle(build_bundle(builder.build(), tmp_path / "b", retriever="sparse")))
    parts = _answer(linker, "hepatitis A and a zzz with ALL", top_k=1, lang="en").parts
    assert [p.text for p in parts] == ["hepatitis A", "ALL"]  # a capital letter closes it; an acronym is no stop word


def _answer(linker, mention, **options):
    [answer] = linker.normalize_each([mention], ngram_threshold=0.95, **options)
    return answer
