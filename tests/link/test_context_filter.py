"""The contextual relevance filter (000 §4.4): windows, example collection, training, thresholds."""

import json

import numpy as np
import pytest

from babelink.bundle.store import build_bundle
from babelink.errors import BabelinkError, InvalidInputError
from babelink.formats.document import Annotation, Document
from babelink.kb.base import KnowledgeBaseBuilder
from babelink.link.context_filter import SETTINGS_FILE, ContextFilter, FilterSettings, filter_window
from babelink.linker import Linker
from babelink.train import context_filter as filter_training


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
    return Linker.open(path, recall_threshold=0.5, link_threshold=0.8, overlap="best")


def test_examples_label_the_matchers_proposals_against_gold(linker):
    examples = filter_training.filter_examples(linker.documents, DOCUMENTS, lambda c: c, window=1)
    labelled = sorted((e.window, e.label) for e in examples)
    assert ("The «cancer» patient", 1) in labelled
    assert ("«Cancer» cells", 0) in labelled
    assert sum(e.label for e in examples) == 4 and len(examples) == 8  # each single word; "asthma models" is no match


def test_balance_subsamples_negatives_reproducibly():
    examples = [filter_training.FilterExample(str(i), "x", int(i < 2)) for i in range(20)]
    balanced = filter_training.balance(examples, 2.0, seed=0)
    assert sum(e.label for e in balanced) == 2 and len(balanced) == 6
    assert balanced == filter_training.balance(examples, 2.0, seed=0)
    assert filter_training.balance(examples, None, seed=0) == examples


def test_train_filter_learns_from_the_proposals(linker, contextual_encoder_dir, tmp_path):
    examples = filter_training.filter_examples(linker.documents, DOCUMENTS, lambda c: c, window=1)
    config = filter_training.FilterTrainingConfig(window=1, epochs=30, batch_size=8, learning_rate=1e-3,
                                               freeze_embeddings=False, warmup_ratio=0.0)
    losses = []
    trained = filter_training.train_filter(contextual_encoder_dir, examples, tmp_path / "filter", config,
                                        lambda step, total, loss: losses.append(loss))
    assert np.mean(losses[-10:]) < np.mean(losses[:10])
    probabilities = trained.probabilities([e.window for e in examples], [e.concept_name for e in examples])
    labels = np.array([e.label for e in examples])
    assert probabilities[labels == 1].mean() > probabilities[labels == 0].mean() + 0.1
    reloaded = ContextFilter(tmp_path / "filter")
    assert reloaded.settings.window == 1
    truncated = filter_training.train_filter(contextual_encoder_dir, examples, tmp_path / "one-layer",
                                          filter_training.FilterTrainingConfig(epochs=1, layers=1))
    assert truncated.model.config.num_hidden_layers == 1 and len(truncated.model.bert.encoder.layer) == 1
    assert np.allclose(
        reloaded.probabilities(["had «asthma»"], ["asthma"]), trained.probabilities(["had «asthma»"], ["asthma"])
    )


class _RuleFilter:
    """A stand-in with a known decision rule, to check threshold tuning and filtered linking
    exactly (the neural filter's own training is tested above)."""

    def __init__(self, threshold=0.5):
        self.settings = FilterSettings(window=1, threshold=threshold)

    def probabilities(self, windows, concept_names):
        relevant = ("The «cancer» patient", "had «asthma»", "An «asthma» attack", "a «cancer» survivor")
        return np.array([0.9 if window in relevant else 0.1 for window in windows], dtype=np.float32)


def test_threshold_tuning_and_filtered_linking(linker):
    filtered = linker.with_options(context_filter=_RuleFilter())
    threshold, f1 = filter_training.tune_threshold(filtered.documents, DOCUMENTS, lambda c: c)
    assert threshold == 0.15 and f1[threshold] == 1.0 and f1[0.05] < 1.0
    assert filtered.link("Cancer cells were grown in asthma models.").mentions == ()
    kept = filtered.link("The cancer patient had asthma.").mentions
    assert [(m.text, m.filter_score) for m in kept] == [("cancer", pytest.approx(0.9)), ("asthma", pytest.approx(0.9))]
    assert linker.context_filter is None and len(linker.link("Cancer cells were grown.").mentions) == 1


def test_fit_filter_trains_tunes_and_leaves_the_linker_alone(linker, contextual_encoder_dir, tmp_path):
    config = filter_training.FilterTrainingConfig(window=1, epochs=2, batch_size=8, learning_rate=1e-3)
    fitted = filter_training.fit_filter(linker, DOCUMENTS, tmp_path / "filter", config, dev=DOCUMENTS,
                                        init=contextual_encoder_dir)
    assert (fitted.documents, fitted.left_out, fitted.relevant) == (len(DOCUMENTS), 0, 4)
    assert fitted.proposals > fitted.relevant and 0.0 <= fitted.dev_f1 <= 1.0
    assert ContextFilter(tmp_path / "filter").settings.threshold == fitted.context_filter.settings.threshold
    assert fitted.context_filter.settings.threshold in filter_training.THRESHOLD_GRID
    assert linker.context_filter is None


def test_training_needs_both_labels(tiny_encoder_dir, tmp_path):
    with pytest.raises(InvalidInputError, match="both relevant and irrelevant"):
        filter_training.train_filter(tiny_encoder_dir, [filter_training.FilterExample("a", "b", 1)], tmp_path / "f")
    with pytest.raises(InvalidInputError, match="no span"):
        filter_training.train_filter(tiny_encoder_dir, [], tmp_path / "f")
    assert not (tmp_path / "f").exists()


def test_an_interrupted_training_leaves_the_filter_that_was_there(linker, contextual_encoder_dir, tmp_path):
    examples = filter_training.filter_examples(linker.documents, DOCUMENTS, lambda c: c, window=1)
    config = filter_training.FilterTrainingConfig(window=1, epochs=1, batch_size=8)
    before = filter_training.train_filter(contextual_encoder_dir, examples, tmp_path / "filter", config)

    def interrupt(step, total, loss):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        filter_training.train_filter(contextual_encoder_dir, examples, tmp_path / "filter", config, interrupt)
    probe = (["had «asthma»"], ["asthma"])
    assert np.allclose(ContextFilter(tmp_path / "filter").probabilities(*probe), before.probabilities(*probe))
    assert [p.name for p in tmp_path.iterdir()] == ["filter"]


def test_bad_filter_directories(tmp_path):
    with pytest.raises(BabelinkError, match="not a babelink context filter"):
        ContextFilter(tmp_path)
    (tmp_path / SETTINGS_FILE).write_text(json.dumps({"window": 2, "unknown": 1}))
    with pytest.raises(BabelinkError, match="invalid context filter settings"):
        ContextFilter(tmp_path)
    (tmp_path / SETTINGS_FILE).write_text("[2]")
    with pytest.raises(BabelinkError, match="expected a JSON object"):
        ContextFilter(tmp_path)
