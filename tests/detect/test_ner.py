"""The learned mention detector (002 §4.2): CRF, BIO labels, training, loading, linking with it."""

import itertools
import json
from dataclasses import replace

import pytest
import torch
from support import babelink

from babelink.bundle.store import build_bundle
from babelink.detect.crf import CRF, bio_constraints
from babelink.detect.ner import HEAD_FILE, NerDetector, bio_labels, bio_spans, first_pieces
from babelink.detect.tokenize import tokenize
from babelink.errors import BabelinkError
from babelink.formats.document import Annotation, Document
from babelink.kb.base import KnowledgeBaseBuilder
from babelink.linker import Linker
from babelink.train.ner import NerTrainingConfig, bio_tags, evaluate_ner, train_ner

LABELS = bio_labels(["A", "B"])


def _random_crf(seed: int) -> CRF:
    torch.manual_seed(seed)
    crf = CRF(len(LABELS), *bio_constraints(LABELS))
    for parameter in crf.parameters():
        parameter.data.normal_()
    return crf


def _all_sequences(length: int) -> torch.Tensor:
    return torch.tensor(list(itertools.product(range(len(LABELS)), repeat=length)))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_crf_log_partition_and_viterbi_match_brute_force(seed):
    crf = _random_crf(seed)
    emissions = torch.randn(3, 4, len(LABELS))
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0], [1, 0, 0, 0]], dtype=torch.bool)
    allowed_start, allowed = bio_constraints(LABELS)
    partitions = crf.log_partition(emissions, mask)
    paths = crf.decode(emissions, mask)
    for row, length in enumerate(mask.sum(1).tolist()):
        sequences = _all_sequences(length)
        scores = crf.sequence_score(emissions[row, :length].expand(len(sequences), -1, -1), sequences,
                                    torch.ones(sequences.shape, dtype=torch.bool))
        assert partitions[row].item() == pytest.approx(torch.logsumexp(scores, 0).item(), abs=1e-4)
        legal = [
            allowed_start[s[0]] and all(allowed[a, b] for a, b in itertools.pairwise(s)) for s in sequences.tolist()
        ]
        best = max((score, s) for score, s, ok in zip(scores.tolist(), sequences.tolist(), legal) if ok)[1]
        assert paths[row] == best
    padded = torch.zeros(3, 4, dtype=torch.long)
    assert crf.log_likelihood(emissions, padded, mask).exp().le(1).all()


def test_bio_constraints_forbid_inside_without_begin():
    allowed_start, allowed = bio_constraints(LABELS)
    assert allowed_start.tolist() == [True, True, False, True, False]
    index = LABELS.index
    assert allowed[index("B-A"), index("I-A")] and allowed[index("I-A"), index("I-A")]
    assert not allowed[index("O"), index("I-A")] and not allowed[index("B-B"), index("I-A")]
    assert bio_spans(["B-A", "I-A", "O", "I-B", "B-A", "B-A", "I-A"]) == [(0, 2, "A"), (3, 4, "B"), (4, 5, "A"),
                                                                          (5, 7, "A")]


def _document(doc_id, text, *mentions, kind="Disease"):
    return Document(doc_id, text, tuple(Annotation(text.index(m), text.index(m) + len(m), m, ("C",), kind)
                                        for m in mentions))


def test_bio_tags_latin_partial_words_and_types():
    text = "The patient had asthma and type 2 diabetes."
    document = Document("1", text, (
        Annotation(16, 20, "asth", ("C1",), "Disease"),  # part of a word: the whole word is labelled
        Annotation(text.index("type"), len(text) - 1, "type 2 diabetes", ("C2",), "Disease"),
        Annotation(text.index("diabetes"), len(text) - 1, "diabetes", ("C2",), "Disease"),  # nested: dropped
        Annotation(4, 11, "patient", ("C3",), "Species"),
    ))
    tokens, tags = bio_tags(document)
    assert [t.text for t in tokens] == ["The", "patient", "had", "asthma", "and", "type", "2", "diabetes"]
    assert tags == ["O", "B-Species", "O", "B-Disease", "O", "B-Disease", "I-Disease", "I-Disease"]
    assert bio_tags(document, types={"Species"})[1] == ["O", "B-Species"] + ["O"] * 6


def test_bio_tags_cjk_characters_and_discontinuous_extent():
    text = "患者有2型糖尿病和高血压。"
    _, tags = bio_tags(_document("1", text, "糖尿病", "高血压", kind=""))
    assert tags == ["O", "O", "O", "O", "O", "B-Mention", "I-Mention", "I-Mention", "O",
                    "B-Mention", "I-Mention", "I-Mention"]
    english = "muscle and joint pain"
    discontinuous = Annotation(0, len(english), "muscle pain", ("C",), "Disease", ((0, 6), (17, 21)))
    assert bio_tags(Document("2", english, (discontinuous,)))[1] == ["B-Disease"] + ["I-Disease"] * 3


def test_first_pieces_skip_a_bare_sentencepiece_marker():
    """XLM-R's tokenizer splits a CJK character given as a word into "▁" and the character."""
    from tokenizers import Tokenizer, pre_tokenizers, processors
    from tokenizers.models import Unigram
    from transformers import PreTrainedTokenizerFast

    pieces = ["<pad>", "<s>", "</s>", "<unk>", "▁", "糖", "▁has", "▁h", "as", "▁a"]
    tokenizer = Tokenizer(Unigram([(piece, -1.0) for piece in pieces], unk_id=3))
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", special_tokens=[("<s>", 1), ("</s>", 2)]
    )
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, pad_token="<pad>", unk_token="<unk>")
    encoded = fast([["糖", "has"], ["a"]], is_split_into_words=True, padding=True)
    assert encoded.tokens(0) == ["<s>", "▁", "糖", "▁has", "</s>"]
    assert first_pieces(encoded, 2) == [[2, 3], [1, 0]]


TRAINING = [
    _document("1", "The patient had asthma.", "asthma"),
    _document("2", "A child with fever was seen.", "fever"),
    _document("3", "Her asthma got worse after the fever.", "asthma", "fever"),
    _document("4", "No fever and no cough today.", "fever", "cough"),
    _document("5", "The cough was dry.", "cough"),
    _document("6", "He has diabetes and asthma.", "diabetes", "asthma"),
    _document("7", "The patient was seen today.", ),
    _document("8", "Diabetes was treated.", "Diabetes"),
]
CONFIG = NerTrainingConfig(learning_rate=1e-2, epochs=15, batch_size=4, max_length=64, warmup_ratio=0.0)


@pytest.fixture(scope="module")
def trained(contextual_encoder_dir, tmp_path_factory):
    losses = []
    detector = train_ner(contextual_encoder_dir, TRAINING, tmp_path_factory.mktemp("ner") / "model", CONFIG,
                         lambda step, total, loss: losses.append(loss))
    return detector, losses


def test_training_lowers_the_loss_and_tags_the_training_mentions(trained, contextual_encoder_dir, tmp_path):
    detector, losses = trained
    assert len(losses) == 30
    assert sum(losses[-5:]) < 0.5 * sum(losses[:5])
    untrained = train_ner(contextual_encoder_dir, TRAINING, tmp_path / "untrained",
                          NerTrainingConfig(epochs=0, max_length=64))
    before, after = evaluate_ner(untrained, TRAINING)["strict"], evaluate_ner(detector, TRAINING)["strict"]
    assert after["f1"] >= 0.9 > before["f1"]
    assert detector.settings.labels == ("O", "B-Disease", "I-Disease")
    assert detector.entities(["Her asthma got worse."]) == [[(4, 10, "Disease")]]


def test_as_type_relabels_every_annotation_and_the_head_learns_at_its_own_rate(contextual_encoder_dir, tmp_path):
    mixed = [_document("1", "The patient had asthma.", "asthma", kind="SpecificDisease"),
             _document("2", "A child with fever was seen.", "fever", kind="Modifier")]
    config = NerTrainingConfig(epochs=1, batch_size=2, max_length=64, learning_rate=0.0, head_learning_rate=1e-2,
                               warmup_ratio=0.0, as_type="Disease")
    untrained = train_ner(contextual_encoder_dir, mixed, tmp_path / "untrained", replace(config, epochs=0))
    detector = train_ner(contextual_encoder_dir, mixed, tmp_path / "model", config)
    assert detector.settings.labels == ("O", "B-Disease", "I-Disease")
    changed = {name for name, value in detector.model.state_dict().items()
               if not torch.equal(value, untrained.model.state_dict()[name])}
    assert changed and all(not name.startswith("encoder.") for name in changed), "encoder rate 0: only the head moves"
    assert "crf.transitions" in changed


def test_save_and_load_round_trip_gives_identical_predictions(trained, tmp_path):
    detector, _ = trained
    detector.save(tmp_path)
    loaded = NerDetector(tmp_path)
    texts = [d.text for d in TRAINING] + ["fever and asthma and cough", ""]
    assert loaded.entities(texts) == detector.entities(texts)
    with torch.inference_mode():
        assert torch.equal(loaded.emissions([["no", "fever"]])[0], detector.emissions([["no", "fever"]])[0])


def test_long_texts_are_tagged_in_windows_cut_at_barriers(trained):
    detector = NerDetector(trained[0].path)
    # 31 sub-tokens hold one sentence (19 word pieces) and the next one's first two words: the
    # window is cut back to the sentence end, a barrier no mention crosses.
    detector.settings = replace(detector.settings, max_length=31)
    text = " ".join(["The patient had asthma."] * 20)
    tokens = tokenize(text)
    windows = detector.windows(text, tokens)
    assert windows == [(first, first + 4) for first in range(0, 80, 4)]
    assert detector.detect([text])[0] == [(start, start + 6) for start in range(16, len(text), 24)]


def test_wrong_paths_are_clear_errors(trained, tmp_path):
    with pytest.raises(BabelinkError, match="not a babelink NER model"):
        NerDetector(tmp_path)
    detector, _ = trained
    detector.save(tmp_path)
    (tmp_path / HEAD_FILE).unlink()
    with pytest.raises(BabelinkError, match="cannot load"):
        NerDetector(tmp_path)


class FixedDetector:
    """Returns given spans (by their text) so that linking is tested apart from tagging."""

    name = "ner"

    def __init__(self, *mentions):
        self.mentions = mentions

    def detect(self, texts):
        return [[(text.index(m), text.index(m) + len(m)) for m in self.mentions if m in text] for text in texts]


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    builder = KnowledgeBaseBuilder()
    for concept_id, name in (("C1", "asthma"), ("C2", "diabetes"), ("C3", "fever")):
        builder.add_name(concept_id, name, preferred=True)
    return build_bundle(builder.build(), tmp_path_factory.mktemp("bundle") / "sparse", retriever="sparse")


def test_linker_links_detected_spans_and_splits_unlinked_ones(bundle):
    detector = FixedDetector("asthma and diabetes", "fever", "patient")
    linker = Linker.open(bundle, link_threshold=0.8, overlap="best", ner=detector)
    text = "The patient had fever, then asthma and diabetes."
    mentions = linker.link(text).mentions
    assert all(text[m.start : m.end] == m.text for m in mentions)
    assert [(m.start, m.end, m.concept.concept_id, m.detector) for m in mentions[:1]] == [(16, 21, "C3", "ner")]
    assert [(m.text, m.concept.concept_id, m.detector) for m in mentions[1:]] == [
        ("asthma", "C1", "ner+ngrams"), ("diabetes", "C2", "ner+ngrams")], "n-grams never end with a stop word"


def test_linker_with_the_trained_detector(bundle, trained):
    linker = Linker.open(bundle, link_threshold=0.8, overlap="best", ner=trained[0])
    text = "Her asthma got worse after the fever."
    document = linker.link(text)
    assert [(m.text, m.concept.concept_id, m.detector) for m in document.mentions] == [("asthma", "C1", "ner"),
                                                                                      ("fever", "C3", "ner")]
    assert all(text[m.start : m.end] == m.text for m in document.mentions)


def test_cli_train_ner_then_link_with_it(contextual_encoder_dir, bundle, tmp_path):

    from babelink.formats.pubtator import write_pubtator

    with open(tmp_path / "train.txt", "w", encoding="utf-8") as stream:
        write_pubtator(TRAINING, stream)
    result = babelink(
        "train",
        "ner",
        "--train",
        tmp_path / "train.txt",
        "--dev",
        tmp_path / "train.txt",
        "--out",
        tmp_path / "ner",
        "--init",
        contextual_encoder_dir,
        "--epochs",
        "15",
        "--batch-size",
        "4",
        "--lr",
        "1e-2",
        "--max-length",
        "64",
    )
    assert result.returncode == 0, result.stderr
    assert "labels O, B-Disease, I-Disease" in result.stderr and "dev strict P" in result.stderr
    result = babelink("link", "--bundle", bundle, "--ner", tmp_path / "ner", "Her asthma got worse after the fever.")
    assert result.returncode == 0, result.stderr
    mentions = json.loads(result.stdout)["mentions"]
    assert [(m["text"], m["concept"], m["detector"]) for m in mentions] == [
        ("asthma", "C1", "ner"),
        ("fever", "C3", "ner"),
    ]
    result = babelink("link", "--bundle", bundle, "--ner", tmp_path, "asthma")
    assert result.returncode == 1 and "not a babelink NER model" in result.stderr
