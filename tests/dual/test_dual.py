"""The collective dual encoder (004): span enumeration, Eq. 4 and pooling against brute force;
segments with exact offsets in any script; training that learns and resumes bit-identically;
a model refused by a bundle whose name vectors it was not trained against."""

import copy
import json
from dataclasses import replace

import pytest
import torch
from fastapi.testclient import TestClient
from safetensors.torch import load_file

from babelink.bundle.store import build_bundle, load_bundle
from babelink.detect.tokenize import tokenize
from babelink.dual.linker import DualLinker, document_segments, word_range
from babelink.dual.model import HEAD_FILE, DualModel
from babelink.dual.spans import boundary_pooled, enumerate_spans, mean_pooled, span_logits
from babelink.encoders.artefacts import WORD_EMBEDDINGS, merge_lora
from babelink.errors import BabelinkError, BundleError, InvalidInputError
from babelink.formats.document import Annotation, Document
from babelink.index.dense import DenseParams
from babelink.kb.base import KnowledgeBaseBuilder
from babelink.linker import Linker
from babelink.serve import create_app
from babelink.train.dual import (
    SPARSE_WEIGHTS,
    START_DIR,
    DualTrainer,
    DualTrainingConfig,
    examples,
    focal_span_loss,
    initial_model,
)
from babelink.train.lora import LORA_FILE

CONCEPTS = {"C1": ["fever", "pyrexia"], "C2": ["asthma", "bronchial asthma"], "C3": ["diabetes", "diabetes mellitus"],
            "C4": ["headache", "cephalalgia"]}
CONFIG = DualTrainingConfig(learning_rate=1e-3, head_learning_rate=1e-2, batch_size=2, epochs=10, max_steps=20,
                            max_length=48, max_span_words=3, hard_negatives=2, random_negatives=2,
                            freeze_embeddings=False, checkpoint_every=10, seed=3)


def _document(doc_id: str, text: str, *mentions: tuple[str, str]) -> Document:
    annotations = []
    for surface, concept in mentions:
        start = text.index(surface)
        annotations.append(Annotation(start, start + len(surface), surface, (concept,), "Disease"))
    return Document(doc_id, text, tuple(annotations))


DOCUMENTS = [
    _document("1", "the patient had fever and asthma", ("fever", "C1"), ("asthma", "C2")),
    _document("2", "no diabetes mellitus but headache", ("diabetes mellitus", "C3"), ("headache", "C4")),
    _document("3", "pyrexia with bronchial asthma today", ("pyrexia", "C1"), ("bronchial asthma", "C2")),
    _document("4", "cephalalgia and diabetes were seen", ("cephalalgia", "C4"), ("diabetes", "C3")),
    _document("5", "she reported an unknown rash", ("unknown rash", "D99")),  # not in the KB
]


@pytest.fixture(scope="module")
def bundle(tiny_encoder_dir, tmp_path_factory):
    builder = KnowledgeBaseBuilder()
    for concept, names in CONCEPTS.items():
        for number, name in enumerate(names):
            builder.add_name(concept, name, preferred=number == 0)
    path = tmp_path_factory.mktemp("bundle") / "dense"
    return load_bundle(build_bundle(builder.build(), path, retriever="dense", encoder=tiny_encoder_dir))


@pytest.fixture(scope="module")
def untrained(tiny_encoder_dir, bundle, tmp_path_factory):
    return DualModel(initial_model(tiny_encoder_dir, bundle, tmp_path_factory.mktemp("dual") / "model", CONFIG))


def test_enumerated_spans_are_every_run_of_at_most_l_words():
    starts, ends = enumerate_spans(5, 3)
    expected = [(a, b) for a in range(5) for b in range(a, min(a + 3, 5))]
    assert list(zip(starts.tolist(), ends.tolist())) == expected


def test_span_logits_match_eq_4_by_brute_force():
    torch.manual_seed(0)
    hidden, weights, bias = torch.randn(2, 7, 4), torch.randn(3, 4), torch.randn(1)
    starts = torch.tensor([[0, 2, 5], [1, 1, 6]])
    ends = torch.tensor([[0, 4, 6], [3, 1, 6]])
    logits = span_logits(hidden, weights, bias, starts, ends)
    for row in range(2):
        for column in range(3):
            i, j = starts[row, column].item(), ends[row, column].item()
            h = hidden[row]
            expected = weights[0] @ h[i] + weights[1] @ h[j] + sum(weights[2] @ h[q] for q in range(i, j + 1)) + bias
            assert logits[row, column].item() == pytest.approx(expected.item(), abs=1e-5)


def test_mean_pooling_and_eq_1_shapes():
    torch.manual_seed(1)
    hidden = torch.randn(2, 6, 4)
    rows, starts, ends = torch.tensor([0, 1, 1]), torch.tensor([1, 0, 5]), torch.tensor([3, 0, 5])
    pooled = mean_pooled(hidden, rows, starts, ends)
    for n, (r, i, j) in enumerate(zip(rows.tolist(), starts.tolist(), ends.tolist())):
        assert torch.allclose(pooled[n], hidden[r, i: j + 1].mean(0), atol=1e-5)
    assert boundary_pooled(hidden, torch.nn.Linear(8, 4), rows, starts, ends).shape == (3, 4)


def test_eq_1_starts_as_the_mean_of_the_boundary_states(untrained):
    hidden = torch.randn(1, 5, untrained.model.boundary.out_features)
    found = boundary_pooled(hidden, untrained.model.boundary, torch.tensor([0]), torch.tensor([1]), torch.tensor([3]))
    assert torch.allclose(found[0], (hidden[0, 1] + hidden[0, 3]) / 2, atol=1e-5)


@pytest.mark.parametrize("text", [
    "患者有糖尿病和哮喘。咳嗽三天，发热。" * 4,
    "למטופל יש סוכרת ואסתמה. הוא משתעל כבר שלושה ימים ויש לו חום גבוה מאוד. " * 4,
])
def test_segments_keep_exact_offsets_in_unspaced_and_right_to_left_scripts(untrained, bundle, text):
    segments = document_segments(untrained, [Document("d", text)])
    assert len(segments) > 1  # 48 sub-tokens per segment force several
    tokens = [(s.offset + t.start, s.offset + t.end, t.text) for s in segments for t in s.tokens]
    assert tokens == [(t.start, t.end, t.text) for t in tokenize(text)]
    linked = DualLinker(untrained, bundle, threshold=0.0).link([Document("d", text)])[0]
    assert linked.mentions
    assert all(text[m.start: m.end] == m.text and m.detector == "dual" for m in linked.mentions)


def test_focal_detection_loss_keeps_the_weight_on_hard_negatives():
    labels = torch.tensor([1.0, 0.0, 0.0])
    easy = focal_span_loss(torch.tensor([3.0, -3.0, -6.0]), labels)
    hard = focal_span_loss(torch.tensor([3.0, 3.0, -6.0]), labels)
    assert hard > 20 * easy  # one confident false span outweighs everything else
    plain = torch.nn.functional.binary_cross_entropy_with_logits(torch.tensor([0.0]), torch.tensor([1.0]))
    assert focal_span_loss(torch.tensor([0.0]), torch.tensor([1.0])).item() == pytest.approx(0.25 * 0.25 * plain.item())


def test_word_range_covers_the_words_a_span_overlaps():
    tokens = tokenize("fever and bronchial asthma")
    assert word_range(tokens, 10, 26) == (2, 3)
    assert word_range(tokens, 12, 14) == (2, 2)
    assert word_range(tokens, 5, 6) is None


def test_examples_label_in_kb_mentions_and_leave_out_the_others(untrained, bundle):
    found = examples(untrained, bundle, DOCUMENTS)
    assert [len(e.mentions) for e in found] == [2, 2, 2, 2, 0]
    assert found[2].mentions[1][:2] == (2, 3)  # "bronchial asthma": words 2–3
    assert found[4].ignored == ((3, 4),)  # "unknown rash" names no KB concept: neither positive nor negative


@pytest.mark.parametrize("lora_rank", [0, 4])
def test_twenty_steps_lower_the_loss_and_resume_bit_identically(tiny_encoder_dir, bundle, tmp_path, lora_rank):
    config = replace(CONFIG, lora_rank=lora_rank)
    straight = DualTrainer(tiny_encoder_dir, bundle, DOCUMENTS, tmp_path / "straight", config)
    batch = straight.examples[:4]
    before = straight.loss(batch, 0).item()
    straight.train()
    history = straight.state.loss_history
    assert len(history) == 20 and sum(history[-5:]) < sum(history[:5])
    straight.dual.model.eval()
    assert straight.loss(batch, 0).item() < before

    class Killed(Exception):
        pass

    def kill_at_12(state, seconds):
        if state.step == 12:
            raise Killed

    with pytest.raises(Killed):  # the last resume point is step 10
        DualTrainer(tiny_encoder_dir, bundle, DOCUMENTS, tmp_path / "resumed", config).train(progress=kill_at_12)
    DualTrainer(tiny_encoder_dir, bundle, DOCUMENTS, tmp_path / "resumed", config).train()
    files = ["model.safetensors", HEAD_FILE] + ([LORA_FILE] if lora_rank else [])
    for file in files:
        first, second = (load_file(str(tmp_path / name / file)) for name in ("straight", "resumed"))
        assert first.keys() == second.keys() and all(torch.equal(first[k], second[k]) for k in first)
    assert json.loads((tmp_path / "resumed" / "training.json").read_text())["steps"] == 20
    with pytest.raises(BabelinkError, match="resume with the same data"):
        DualTrainer(tiny_encoder_dir, bundle, DOCUMENTS[:2], tmp_path / "resumed", config)
    if lora_rank:  # the checkpoint is the start's encoder plus B @ A, and only the adapted layers moved
        start, trained = (load_file(str(path / "model.safetensors")) for path in (tmp_path / "straight" / START_DIR,
                                                                                   tmp_path / "straight"))
        merge_lora(start, load_file(str(tmp_path / "straight" / LORA_FILE)))
        assert start.keys() == trained.keys()
        assert all(torch.allclose(start[k], trained[k], atol=1e-6) for k in start)
        assert torch.equal(start[WORD_EMBEDDINGS], trained[WORD_EMBEDDINGS])


def test_dev_documents_choose_the_checkpoint_and_its_threshold(tiny_encoder_dir, bundle, tmp_path):
    trainer = DualTrainer(tiny_encoder_dir, bundle, DOCUMENTS, tmp_path / "m", CONFIG)
    trainer.train(dev=DOCUMENTS[:2])
    best_step, best_f1, best_threshold, best_weight = max(trainer.state.evaluations, key=lambda e: e[1])
    settings = DualModel(tmp_path / "m").settings
    assert (settings.threshold, settings.sparse_weight) == (best_threshold, best_weight)
    assert 0.0 <= best_f1 <= 1.0 and best_step <= 20 and best_weight in SPARSE_WEIGHTS


def test_a_dual_encoder_as_init_keeps_its_span_scorer(tiny_encoder_dir, bundle, tmp_path):
    DualTrainer(tiny_encoder_dir, bundle, DOCUMENTS, tmp_path / "first", replace(CONFIG, max_steps=4)).train()
    first = DualModel(tmp_path / "first")
    again = DualModel(initial_model(tmp_path / "first", bundle, tmp_path / "again", CONFIG))
    assert first.model.span_weights.abs().sum() > 0
    assert torch.equal(again.model.span_weights, first.model.span_weights)
    assert torch.equal(again.model.boundary.weight, first.model.boundary.weight)
    fresh = DualModel(initial_model(tiny_encoder_dir, bundle, tmp_path / "fresh", CONFIG))
    assert not fresh.model.span_weights.any()


def test_linker_links_and_disambiguates_in_one_pass(untrained, bundle):
    linker = Linker(bundle, model=untrained)
    documents = [DOCUMENTS[0], DOCUMENTS[1]]
    answers = linker.disambiguate(documents, top_k=2)
    assert [len(found) for found in answers] == [2, 2]
    assert all(1 <= len(candidates) <= 2 and candidates[0].probability is not None
               for found in answers for candidates in found)
    record = linker.link_documents([Document("x", "fever and asthma")])[0].to_dict()
    assert record["provenance"]["bundle"] and all(m["detector"] == "dual" for m in record["mentions"])
    with TestClient(create_app(linker)) as client:
        assert client.get("/health").json()["model"] == f"dual encoder {untrained.path}"


def test_the_tf_idf_weight_links_a_span_by_its_own_text_and_defined_abbreviation(untrained, bundle):
    """At w = 1 the span's TF-IDF cosine alone ranks (every gold text is a KB name, whatever the
    untrained vectors say); a defined short form is searched as its long form."""
    text = "bronchial asthma (BA) and pyrexia; later BA"
    document = _document("ab", text, ("bronchial asthma", "C2"), ("pyrexia", "C1"))
    document = replace(document, annotations=(*document.annotations,
                                              Annotation(text.rindex("BA"), len(text), "BA", ("C2",), "Disease")))
    linker = DualLinker(untrained, bundle)
    hits = linker.span_hits([document], 0.0)
    for weight, expected in ((1.0, ["C2", "C1", "C2"]), (0.0, None)):
        top = {(p.start, p.end): p.candidates[0].concept_id for p in linker.ranked(hits, 1, weight)[0]}
        found = [top.get((a.start, a.end)) for a in document.annotations]
        assert expected is None and all(found) or found == expected
    weighted = copy.copy(untrained)
    weighted.settings = replace(untrained.settings, sparse_weight=1.0)
    answers = DualLinker(weighted, bundle).disambiguate([document])[0]
    assert [candidates[0].concept_id for candidates in answers] == ["C2", "C1", "C2"]
    assert answers[0][0].sparse_score == pytest.approx(1.0)


def test_dev_tuning_skips_thresholds_that_most_spans_clear(untrained, bundle, monkeypatch):
    """An early checkpoint finds nearly every span a mention: millions of vectors on a dev set."""
    from babelink.train import dual as dual_training

    even = copy.deepcopy(untrained)
    with torch.no_grad():
        even.model.span_bias.fill_(0.0)  # p(m) = 0.5 for every span
    linker = DualLinker(even, bundle)
    every = linker.span_hits(DOCUMENTS, 0.0)
    assert len(every) > 2 * len(DOCUMENTS) and linker.span_hits(DOCUMENTS, 0.0, max_hits=len(every) - 1) is None
    monkeypatch.setattr(dual_training, "MAX_HITS_PER_DOCUMENT", 2)
    f1, threshold, _ = dual_training.tune_decision(linker, DOCUMENTS)
    assert threshold >= 0.5 and f1 == 0.0  # no span lies above 0.5; every lower threshold has too many


def test_the_span_pipeline_has_no_one_pass_disambiguation(bundle):
    with pytest.raises(InvalidInputError, match="dual encoder"):
        Linker(bundle).disambiguate(DOCUMENTS[:1])


def test_a_bundle_built_with_another_encoder_is_refused(untrained, contextual_encoder_dir, tmp_path):
    builder = KnowledgeBaseBuilder()
    builder.add_name("C1", "fever", preferred=True)
    other = load_bundle(build_bundle(builder.build(), tmp_path / "other", retriever="dense",
                                     encoder=contextual_encoder_dir))
    with pytest.raises(BundleError, match="trained against"):
        Linker(other, model=untrained)
    sparse = load_bundle(build_bundle(builder.build(), tmp_path / "sparse", retriever="sparse"))
    with pytest.raises(BundleError, match="no dense index"):
        Linker(sparse, model=untrained)


def test_a_lazy_bundle_links_as_one_that_searches_every_name(untrained, tiny_encoder_dir, tmp_path, monkeypatch):
    """A lazy index searches no name itself; the dual encoder encodes them all once and searches them exactly."""
    monkeypatch.setenv("BABELINK_HOME", str(tmp_path / "home"))
    builder = KnowledgeBaseBuilder()
    for concept, names in CONCEPTS.items():
        for number, name in enumerate(names):
            builder.add_name(concept, name, preferred=number == 0)
    lazy = load_bundle(build_bundle(builder.build(), tmp_path / "lazy", encoder=tiny_encoder_dir,
                                    dense_params=DenseParams(kind="lazy")))
    dense = load_bundle(build_bundle(builder.build(), tmp_path / "flat", retriever="dense", encoder=tiny_encoder_dir,
                                     dense_params=DenseParams(kind="flat")))

    def linked(target) -> list[tuple]:
        """(document, start, end, concept, score) of every candidate, sorted: the two searches sum
        in different orders, so concepts a few 1e-8 apart may rank either way."""
        found = DualLinker(untrained, target, threshold=0.0).link(DOCUMENTS)
        return sorted((number, m.start, m.end, c.concept_id, c.score)
                      for number, d in enumerate(found) for m in d.mentions for c in m.candidates)

    expected, got = linked(dense), linked(lazy)
    assert expected
    assert [row[:4] for row in got] == [row[:4] for row in expected]
    assert [row[4] for row in got] == pytest.approx([row[4] for row in expected], abs=1e-5)


def test_cli_trains_then_links_with_the_model(tiny_encoder_dir, bundle, tmp_path):
    from support import babelink

    from babelink.formats.pubtator import write_pubtator

    corpus = tmp_path / "train.txt"
    with open(corpus, "w", encoding="utf-8") as stream:
        write_pubtator(DOCUMENTS, stream)
    trained = babelink("train", "dual", "--bundle", bundle.path, "--train", corpus, "--dev", corpus, "--init",
                       tiny_encoder_dir, "--out", tmp_path / "model", "--max-steps", "4", "--batch-size", "2",
                       "--max-span-words", "3")
    assert trained.returncode == 0, trained.stderr
    assert "dev strict F1" in trained.stderr
    (tmp_path / "in.jsonl").write_text(json.dumps({"id": "a", "text": "fever and asthma"}) + "\n")
    linked = babelink("link", "--bundle", bundle.path, "--model", tmp_path / "model", "--input", tmp_path / "in.jsonl",
                      "--output", tmp_path / "out.jsonl")
    assert linked.returncode == 0, linked.stderr
    record = json.loads((tmp_path / "out.jsonl").read_text())
    assert record["id"] == "a" and all(m["detector"] == "dual" for m in record["mentions"])
    missing = babelink("link", "--bundle", bundle.path, "--model", tmp_path / "nothing", "fever")
    assert missing.returncode != 0 and "babelink train dual" in missing.stderr and "Traceback" not in missing.stderr
