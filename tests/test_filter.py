"""The contextual relevance filter (000 §4.4): windows, example collection, training, thresholds."""

import json

import numpy as np
import pytest

from babelink.errors import BabelinkError
from babelink.formats.document import Annotation, Document
from babelink.kb.base import KnowledgeBaseBuilder
from babelink.link.bundle import build_bundle
from babelink.link.documents import LinkParams
from babelink.link.pipeline import Linker
from babelink.link.rerank import SETTINGS_FILE, ContextFilter, FilterSettings, filter_window
from babelink.train import crossencoder


def test_window_marks_the_span_with_context_on_each_side():
    text = "Patients with type 2 diabetes mellitus and severe hypertension were enrolled."
    start = text.index("diabetes")
    assert filter_window(text, start, start + 17, 2) == "type 2 «diabetes mellitus» and severe"
    assert filter_window(text, start, start + 8, 0) == "«diabetes»"
    assert filter_window("患者有2型糖尿病和高血压。", 5, 8, 2) == "有2型«糖尿病»和高血压"


def _document(doc_id, text, *gold):
    annotations = tuple(Annotation(text.index(m), text.index(m) + len(m), m, (c,)) for m, c in gold)
    return Document(doc_id, text, annotations)


DOCUMENTS = [
    _document("1", "The cancer patient had asthma.", ("cancer", "C1"), ("asthma", "C2")),
    _document("2", "Cancer cells were grown in asthma models.", ),
    _document("3", "An asthma attack in a cancer survivor.", ("asthma", "C2"), ("cancer", "C1")),
    _document("4", "Cancer cells and asthma models again.", ),
]


@pytest.fixture(scope="module")
def linker(tmp_path_factory):
    builder = KnowledgeBaseBuilder()
    builder.add_name("C1", "cancer", preferred=True)
    builder.add_name("C2", "asthma", preferred=True)
    path = build_bundle(builder.build(), tmp_path_factory.mktemp("b") / "sparse", retriever="sparse")
    return Linker.from_bundle(path, link_params=LinkParams(recall_threshold=0.5, link_threshold=0.8, overlap="best"))


def test_examples_label_the_matchers_proposals_against_gold(linker):
    examples = crossencoder.filter_examples(linker.document_linker, DOCUMENTS, lambda c: c, window=1)
    labelled = sorted((e.window, e.label) for e in examples)
    assert ("The «cancer» patient", 1) in labelled
    assert ("«Cancer» cells", 0) in labelled
    assert sum(e.label for e in examples) == 4 and len(examples) > 8


def test_balance_subsamples_negatives_reproducibly():
    examples = [crossencoder.FilterExample(str(i), "x", int(i < 2)) for i in range(20)]
    balanced = crossencoder.balance(examples, 2.0, seed=0)
    assert sum(e.label for e in balanced) == 2 and len(balanced) == 6
    assert balanced == crossencoder.balance(examples, 2.0, seed=0)
    assert crossencoder.balance(examples, None, seed=0) == examples


def test_train_filter_learns_from_the_proposals(linker, contextual_encoder_dir, tmp_path):
    examples = crossencoder.filter_examples(linker.document_linker, DOCUMENTS, lambda c: c, window=1)
    config = crossencoder.FilterTrainingConfig(window=1, epochs=30, batch_size=8, learning_rate=1e-3,
                                               freeze_embeddings=False, warmup_ratio=0.0)
    losses = []
    trained = crossencoder.train_filter(contextual_encoder_dir, examples, tmp_path / "filter", config,
                                        lambda step, total, loss: losses.append(loss))
    assert np.mean(losses[-10:]) < np.mean(losses[:10])
    probabilities = trained.probabilities([e.window for e in examples], [e.concept_name for e in examples])
    labels = np.array([e.label for e in examples])
    assert probabilities[labels == 1].mean() > probabilities[labels == 0].mean() + 0.1
    reloaded = ContextFilter(tmp_path / "filter")
    assert reloaded.settings.window == 1
    truncated = crossencoder.train_filter(contextual_encoder_dir, examples, tmp_path / "one-layer",
                                          crossencoder.FilterTrainingConfig(epochs=1, layers=1))
    assert truncated.model.config.num_hidden_layers == 1 and len(truncated.model.bert.encoder.layer) == 1
    assert np.allclose(reloaded.probabilities(["had «asthma»"], ["asthma"]), trained.probabilities(["had «asthma»"], ["asthma"]))


class _RuleFilter:
    """A stand-in with a known decision rule, to check threshold tuning and filtered linking
    exactly (the neural filter's own training is tested above)."""

    def __init__(self, threshold=0.5):
        self.settings = FilterSettings(window=1, threshold=threshold)

    def probabilities(self, windows, concept_names):
        relevant = ("The «cancer» patient", "had «asthma»", "An «asthma» attack", "a «cancer» survivor")
        return np.array([0.9 if window in relevant else 0.1 for window in windows], dtype=np.float32)


def test_threshold_tuning_and_filtered_linking(linker):
    document_linker = linker.document_linker
    document_linker.context_filter = _RuleFilter()
    try:
        threshold, f1 = crossencoder.tune_threshold(document_linker, DOCUMENTS, lambda c: c)
        assert threshold == 0.15 and f1[threshold] == 1.0 and f1[0.05] < 1.0
        assert linker.link("Cancer cells were grown in asthma models.").mentions == ()
        kept = linker.link("The cancer patient had asthma.").mentions
        assert [(m.text, m.filter_score) for m in kept] == [("cancer", pytest.approx(0.9)), ("asthma", pytest.approx(0.9))]
    finally:
        document_linker.context_filter = None


def test_training_needs_both_labels(tiny_encoder_dir, tmp_path):
    with pytest.raises(ValueError, match="both relevant and irrelevant"):
        crossencoder.train_filter(tiny_encoder_dir, [crossencoder.FilterExample("a", "b", 1)], tmp_path / "f")
    assert not (tmp_path / "f").exists()


def test_bad_filter_directories(tmp_path):
    with pytest.raises(BabelinkError, match="not a babelink context filter"):
        ContextFilter(tmp_path)
    (tmp_path / SETTINGS_FILE).write_text(json.dumps({"window": 2, "unknown": 1}))
    with pytest.raises(BabelinkError, match="invalid context filter settings"):
        ContextFilter(tmp_path)
    (tmp_path / SETTINGS_FILE).write_text("[2]")
    with pytest.raises(BabelinkError, match="expected a JSON object"):
        ContextFilter(tmp_path)
