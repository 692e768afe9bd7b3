import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.feature_extraction.text import TfidfVectorizer

from babelink.index.ngrams import NgramVectorizer
from babelink.index.sparse import TfidfNameIndex, TfidfParams

NAMES = ["myocardial infarction", "heart attack", "diabète sucré", "high  blood pressure", "fever", "a",
         "心肌梗死", "סוכרת", "tb"]
# Spaces of several kinds, short words, scripts without spaces, repeated n-grams.
texts = st.text(alphabet=st.sampled_from(list("abcdeè 心肌\t\u00a0xyz")), max_size=24)
ANALYZERS = [("char_wb", 2, 4, True), ("char", 1, 4, False), ("char", 3, 3, True), ("char_wb", 1, 3, False)]


def fitted(analyzer, ngram_min, ngram_max, sublinear):
    reference = TfidfVectorizer(analyzer=analyzer, ngram_range=(ngram_min, ngram_max), lowercase=False,
                                sublinear_tf=sublinear, dtype=np.float32).fit(NAMES)
    terms = sorted(reference.vocabulary_, key=reference.vocabulary_.__getitem__)
    return reference, NgramVectorizer(analyzer, ngram_min, ngram_max, sublinear, terms, reference.idf_)


@pytest.mark.parametrize("setting", ANALYZERS)
@settings(max_examples=60, deadline=None)
@given(strings=st.lists(texts, min_size=1, max_size=5))
def test_rows_equal_scikit_learn(setting, strings):
    reference, ours = fitted(*setting)
    assert ours.analyze("x") == reference.build_analyzer()("x")
    for string in strings:
        assert ours.analyze(string) == reference.build_analyzer()(string)
    expected = reference.transform(strings).toarray()
    np.testing.assert_allclose(ours.transform(strings).toarray(), expected, atol=1e-6)


def test_unseen_ngrams_lower_the_seen_weights_by_the_norm_they_take():
    _, ours = fitted("char_wb", 2, 4, True)
    seen_only = ours.transform(["fever"]).toarray()[0]
    with_unseen = ours.transform(["fever zqzq"], unseen_idf=5.0)
    assert with_unseen.nnz == np.count_nonzero(seen_only)  # "zqzq" has no column
    weights = with_unseen.toarray()[0]
    assert 0.0 < np.linalg.norm(weights) < 1.0
    np.testing.assert_allclose(weights / np.linalg.norm(weights), seen_only, atol=1e-6)
    assert ours.transform(["zqzq"], unseen_idf=5.0).nnz == 0


def test_an_unknown_analyzer_is_refused():
    with pytest.raises(ValueError, match="analyzer"):
        NgramVectorizer("word", 1, 2, True, ["a"], np.ones(1))


def test_the_index_searches_without_importing_scikit_learn_after_load(tmp_path):
    import subprocess
    import sys

    index = TfidfNameIndex.fit(NAMES, TfidfParams(min_posting_limit=1))
    index.save(tmp_path)
    script = ("import sys; from pathlib import Path; from babelink.index.sparse import TfidfNameIndex;"
              f"rows, _ = TfidfNameIndex.load(Path({str(tmp_path)!r})).search(['heart atack'], 1);"
              "assert rows[0, 0] == 1, rows; assert 'sklearn' not in sys.modules")
    subprocess.run([sys.executable, "-c", script], check=True)
