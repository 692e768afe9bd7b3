"""Approximate name vectors: the IDF-weighted mean of each name's token vectors, in a PCA basis,
searched by real query vectors so that a lazy index reaches names TF-IDF cannot shortlist."""

import numpy as np
import pytest
import scipy.sparse as sp

from babelink.bundle.store import build_bundle, load_bundle
from babelink.encoders import open_encoder
from babelink.errors import BundleError
from babelink.index.approximate import BASIS_FILE, DIRECTORY, FIT_RIDGE, ApproximateNames, _fitted
from babelink.index.dense import DenseParams
from babelink.index.lazy import write_lazy_index
from babelink.kb.base import KnowledgeBaseBuilder
from babelink.linker import Linker

NAMES = ["myocardial infarction", "heart attack", "infarto de miocardio", "diabetes mellitus", "asthma",
         "asma bronquial", "arterial hypertension", "hipertension arterial", "diabetes"]


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("BABELINK_HOME", str(tmp_path / "home"))


@pytest.fixture
def encoder(contextual_encoder_dir):
    return open_encoder(contextual_encoder_dir)


def test_a_name_vector_is_the_idf_weighted_mean_of_its_tokens_in_the_basis(encoder):
    approximate = ApproximateNames.build(encoder, NAMES)
    ids = encoder.token_ids([NAMES[0]])[0]
    positions = np.searchsorted(approximate.token_ids, ids)
    weights = approximate.idf[positions]
    mean = (weights[:, None] * approximate.token_vectors[positions].astype(np.float32)).sum(axis=0) / weights.sum()
    projected = (mean / np.linalg.norm(mean) - approximate.mean) @ approximate.components.T
    assert np.allclose(approximate.index.vectors(np.array([0]))[0], projected / np.linalg.norm(projected), atol=1e-5)


def test_rare_tokens_weigh_more():
    class Tokens:
        dimension = 2

        def token_ids(self, texts):
            return [[int(word) for word in text.split()] for text in texts]

        def encode_tokens(self, ids):
            return np.array([[1.0, 0.0] if token == 1 else [0.0, 1.0] for token in ids], np.float32)

        def encode(self, texts):
            return np.full((len(texts), 2), np.sqrt(0.5), np.float32)

    approximate = ApproximateNames.build(Tokens(), ["1 2", "1", "1", "1 3"])
    assert approximate.idf[1] > approximate.idf[0]  # token 2 is in one name, token 1 in all four


def test_fitted_token_vectors_bring_the_names_means_nearer_their_real_vectors(encoder):
    """The fit's point: a name's mean of fitted token vectors lies nearer the encoder's vector of
    the whole name than its mean of lone token vectors (the contextual encoder mixes tokens)."""
    approximate = ApproximateNames.build(encoder, NAMES)
    real = encoder.encode(NAMES)

    def cosines(token_vectors):
        means = []
        for ids in encoder.token_ids(NAMES):
            positions = np.searchsorted(approximate.token_ids, ids)
            weights = approximate.idf[positions][:, None]
            means.append((weights * token_vectors[positions]).sum(axis=0) / weights.sum())
        means = np.array(means)
        return (means * real).sum(axis=1) / np.linalg.norm(means, axis=1)

    fitted = cosines(approximate.token_vectors.astype(np.float32))
    lone = cosines(encoder.encode_tokens(approximate.token_ids.tolist()))
    assert fitted.mean() > lone.mean() + 0.01 and fitted.min() > 0.9


def test_the_fit_solves_its_ridge_normal_equations():
    rng = np.random.default_rng(3)
    weights = sp.random(40, 12, density=0.2, format="csr", random_state=4, dtype=np.float32)
    targets, lone = rng.normal(size=(40, 5)).astype(np.float32), rng.normal(size=(12, 5)).astype(np.float32)
    gram = (weights.T @ weights).toarray() + FIT_RIDGE * np.eye(12)
    exact = np.linalg.solve(gram, weights.T @ targets + FIT_RIDGE * lone)
    assert np.allclose(_fitted(weights, targets, lone), exact, atol=1e-3)


def test_a_basis_saved_before_the_fit_loads_and_grows_from_lone_token_vectors(encoder, tmp_path):
    built = ApproximateNames.build(encoder, NAMES)
    built.token_vectors = None
    built.save(tmp_path)
    grown = ApproximateNames.load(tmp_path, writable=True)
    assert grown.token_vectors is None
    grown.add(encoder, ["asthma"])
    ids = encoder.token_ids(["asthma"])[0]
    weights = grown.idf[np.searchsorted(grown.token_ids, ids)]
    mean = (weights[:, None] * encoder.encode_tokens(ids)).sum(axis=0) / weights.sum()
    projected = (mean / np.linalg.norm(mean) - grown.mean) @ grown.components.T
    assert np.allclose(grown.index.vectors(np.array([len(NAMES)]))[0], projected / np.linalg.norm(projected),
                       atol=1e-5)


def test_token_vectors_of_another_shape_are_refused(encoder, tmp_path):
    built = ApproximateNames.build(encoder, NAMES)
    built.token_vectors = built.token_vectors[:-1]
    built.save(tmp_path)
    with pytest.raises(BundleError, match="token vectors for"):
        ApproximateNames.load(tmp_path)


def test_added_names_get_the_rows_a_build_gave_them(encoder, tmp_path):
    built = ApproximateNames.build(encoder, NAMES)
    built.save(tmp_path)
    grown = ApproximateNames.load(tmp_path, writable=True)
    grown.add(encoder, NAMES[:3] + ["hypertension"])
    assert len(grown) == len(NAMES) + 4
    rows = grown.index.vectors(np.arange(len(NAMES), len(NAMES) + 3))
    assert np.allclose(rows, built.index.vectors(np.arange(3)), atol=1e-5)
    assert np.allclose(grown.components, built.components)


def test_search_is_best_first_and_keeps_to_the_allowed_rows(encoder):
    approximate = ApproximateNames.build(encoder, NAMES)
    queries = encoder.encode(["heart attack", "asthma"])
    rows, scores = approximate.search(queries, 4)
    assert rows.shape == (2, 4) and np.all(np.diff(scores, axis=1) <= 0)
    projected = (queries - approximate.mean) @ approximate.components.T
    brute = projected @ approximate.index.vectors(np.arange(len(NAMES))).T
    assert rows.tolist() == np.argsort(-brute, axis=1)[:, :4].tolist()
    allowed = np.zeros(len(NAMES), dtype=bool)
    allowed[[0, 4]] = True
    rows, scores = approximate.search(queries, 4, allowed)
    assert set(rows[:, :2].ravel()) == {0, 4} and np.all(rows[:, 2:] == -1) and np.all(scores[:, 2:] == 0)


def test_an_encoder_that_cannot_encode_tokens_writes_a_lazy_index_without_them(tmp_path, encoder):
    class TextsOnly:
        dimension = encoder.dimension

        def encode(self, texts):
            return encoder.encode(texts)

        def describe(self):
            return encoder.describe()

    files = write_lazy_index(DenseParams(kind="lazy"), TextsOnly(), NAMES, tmp_path)
    assert [path.name for path in files] == ["dense_params.json"]
    assert ApproximateNames.load(tmp_path) is None


@pytest.fixture
def kb():
    builder = KnowledgeBaseBuilder()
    for concept, names in {"C1": NAMES[:3], "C2": [NAMES[3], NAMES[8]], "C3": NAMES[4:6], "C4": NAMES[6:8]}.items():
        for position, name in enumerate(names):
            builder.add_name(concept, name, preferred=position == 0)
    return builder.build()


def test_a_lazy_bundle_ranks_names_sharing_no_ngram_with_the_mention(kb, tmp_path, home, contextual_encoder_dir):
    """心肌梗死 shares no character with any name: TF-IDF shortlists nothing, the approximate
    search finds candidates, and their true cosines rank them as a flat index does."""
    lazy = build_bundle(kb, tmp_path / "lazy", encoder=contextual_encoder_dir, dense_params=DenseParams(kind="lazy"))
    assert BASIS_FILE in {path.name for path in (lazy / "dense" / DIRECTORY).iterdir()}
    assert load_bundle(lazy).dense.encoded() == len(NAMES)  # the names the fit encoded, kept for first need
    flat = Linker.open(build_bundle(kb, tmp_path / "flat", encoder=contextual_encoder_dir,
                                    dense_params=DenseParams(kind="flat")))
    got = [(c.concept_id, round(c.score, 4)) for c in Linker.open(lazy).normalize("心肌梗死", top_k=4)]
    assert got and got == [(c.concept_id, round(c.score, 4)) for c in flat.normalize("心肌梗死", top_k=4)]


def test_approximate_vectors_that_do_not_match_the_names_are_refused(kb, tmp_path, home, contextual_encoder_dir):
    path = build_bundle(kb, tmp_path / "lazy", encoder=contextual_encoder_dir, dense_params=DenseParams(kind="lazy"))
    other = tmp_path / "other"
    other.mkdir()
    ApproximateNames.build(open_encoder(contextual_encoder_dir), NAMES[:-1]).save(other)
    for name in ("faiss.index", BASIS_FILE):
        (path / "dense" / DIRECTORY / name).write_bytes((other / DIRECTORY / name).read_bytes())
    with pytest.raises(BundleError, match="manifest says"):
        load_bundle(path)
    with pytest.raises(BundleError, match="approximate"):
        _load_lazy(path)


def _load_lazy(path):
    """The lazy index as a load builds it, past the manifest's size check (which a replaced file fails first)."""
    from babelink.bundle.store import _load_dense, read_manifest
    from babelink.index.names import NameTable

    manifest = read_manifest(path)
    return _load_dense(path, manifest["dense"]["encoder"], NameTable.load(path / "names"))


def test_an_update_gives_added_names_approximate_rows_in_the_bundle_basis(kb, tmp_path, home, contextual_encoder_dir):
    from babelink.bundle.update import update_bundle

    path = build_bundle(kb, tmp_path / "lazy", encoder=contextual_encoder_dir, dense_params=DenseParams(kind="lazy"))
    before = load_bundle(path).dense.approximate
    builder = KnowledgeBaseBuilder()
    builder.add_name("C5", "kidney stone", preferred=True)
    builder.add_name("C3", "asthma attack")
    updated = load_bundle(update_bundle(path, builder.build(), tmp_path / "updated"), verify=True)
    after = updated.dense.approximate
    assert len(after) == len(updated.names) == len(before) + 2
    kept = np.arange(len(before))
    assert np.array_equal(after.index.vectors(kept), before.index.vectors(kept))
    want = before.vectors_of(open_encoder(contextual_encoder_dir), updated.names.strings[len(before) :])
    assert np.allclose(after.index.vectors(np.arange(len(before), len(after))), want, atol=1e-6)
    found = [c.concept_id for c in Linker(updated).normalize("kidney stone", top_k=1)]
    assert found == ["C5"]
