import json

import numpy as np
import pytest

from babelink.encoders import open_encoder
from babelink.encoders.cache import CachedEncoder
from babelink.encoders.transformer import SETTINGS_FILE, EncoderSettings, TransformerEncoder, settings_for
from babelink.errors import BabelinkError
from babelink.index.dense import PAIRS_PER_SLICE, DenseNameIndex, DenseParams, StoredNameVectors

TEXTS = ["myocardial infarction", "asthma", "diabetes mellitus type 2", "a", "infarto agudo de miocardio", "asthma"]


@pytest.fixture(scope="module")
def encoder(tiny_encoder_dir):
    return TransformerEncoder(tiny_encoder_dir, EncoderSettings(precision="fp32", batch_size=2))


def test_vectors_are_unit_length_and_do_not_depend_on_batching(encoder):
    together = encoder.encode(TEXTS)
    alone = np.stack([encoder.encode([text])[0] for text in TEXTS])
    assert together.shape == (len(TEXTS), 32) and together.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(together, axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(together, alone, atol=1e-5)  # length-sorted batches keep input order
    assert np.allclose(together[1], together[5]) and not np.allclose(together[0], together[1])
    assert encoder.encode([]).shape == (0, 32)


def test_pooling_prefix_and_truncation_change_vectors(tiny_encoder_dir, encoder):
    mean = TransformerEncoder(tiny_encoder_dir, EncoderSettings(pooling="mean", precision="fp32"))
    prefixed = TransformerEncoder(tiny_encoder_dir, EncoderSettings(prefix="query: ", precision="fp32"))
    short = TransformerEncoder(tiny_encoder_dir, EncoderSettings(max_length=4, precision="fp32"))
    base = encoder.encode(TEXTS[:1])
    for other in (mean, prefixed):
        assert not np.allclose(other.encode(TEXTS[:1]), base)
    # "a" and "ab…" share their first two word pieces: truncated to 4 tokens they coincide.
    np.testing.assert_allclose(short.encode(["abcdef"]), short.encode(["abxyz"]), atol=1e-6)


def test_missing_or_wrong_checkpoint_is_a_clear_error(tmp_path):
    with pytest.raises(BabelinkError, match=rf"{tmp_path / 'nope'}.*not a transformers checkpoint.*never downloads"):
        open_encoder(tmp_path / "nope")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "config.json").write_text("{}")
    with pytest.raises(BabelinkError, match="broken.*cannot load"):
        open_encoder(tmp_path / "broken")


def test_settings_file_beside_the_checkpoint(tmp_path):
    assert settings_for(tmp_path) == EncoderSettings()
    (tmp_path / SETTINGS_FILE).write_text(json.dumps({"pooling": "mean", "prefix": "query: "}))
    assert settings_for(tmp_path, max_length=12) == EncoderSettings(pooling="mean", prefix="query: ", max_length=12)
    (tmp_path / SETTINGS_FILE).write_text(json.dumps({"pool": "mean"}))
    with pytest.raises(BabelinkError, match=r"babelink_encoder.json.*unknown field.*pool"):
        settings_for(tmp_path)
    with pytest.raises(BabelinkError, match="pooling must be"):
        EncoderSettings(pooling="max")


def test_cached_encoder_returns_the_same_vectors_and_stays_bounded(encoder):
    cached = CachedEncoder(encoder, max_entries=3)
    np.testing.assert_allclose(cached.encode(TEXTS), encoder.encode(TEXTS), atol=1e-6)
    assert len(cached._vectors) == 3
    np.testing.assert_allclose(cached.encode(TEXTS[:2]), encoder.encode(TEXTS[:2]), atol=1e-6)


def _unit(rows: int, dim: int = 32, seed: int = 0) -> np.ndarray:
    vectors = np.random.default_rng(seed).standard_normal((rows, dim)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


@pytest.mark.parametrize("kind", ["flat", "hnsw", "ivfflat", "ivffastscan"])
def test_dense_index_finds_nearest_and_round_trips(kind, tmp_path):
    vectors = _unit(500)
    index = DenseNameIndex.build(vectors, DenseParams(kind=kind))
    rows, scores = index.search(vectors[:5], 3)
    assert rows[:, 0].tolist() == [0, 1, 2, 3, 4]
    np.testing.assert_allclose(scores[:, 0], 1.0, rtol=1e-5)
    pairs = index.score_pairs(vectors[:5], np.repeat(np.arange(5), 3), rows.ravel())
    np.testing.assert_allclose(pairs.reshape(5, 3), scores, rtol=1e-5)
    even = np.arange(500) % 2 == 0
    filtered, _ = index.search(vectors[:5], 3, even)
    assert (filtered % 2 == 0).all() and filtered[[0, 2, 4], 0].tolist() == [0, 2, 4]
    index.save(tmp_path)
    loaded = DenseNameIndex.load(tmp_path)
    assert loaded.params == index.params and len(loaded) == 500
    np.testing.assert_array_equal(loaded.search(vectors[:5], 3)[0], rows)
    padded, padded_scores = loaded.search(vectors[:1], 600)
    assert (padded[0, 500:] == -1).all() and (padded_scores[0, 500:] == 0).all()
    with pytest.raises(BabelinkError, match="shape"):
        loaded.search(vectors[:1, :16], 3)


def test_score_pairs_beyond_one_slice_match_each_product():
    vectors = _unit(300)
    index = DenseNameIndex.build(vectors, DenseParams(kind="flat"))
    rng = np.random.default_rng(1)
    query_rows = np.sort(rng.integers(0, 40, PAIRS_PER_SLICE * 2 + 7))
    string_rows = rng.integers(0, 300, len(query_rows))
    expected = (vectors[:40][query_rows] * vectors[string_rows]).sum(axis=1)
    np.testing.assert_allclose(index.score_pairs(vectors[:40], query_rows, string_rows), expected, atol=1e-6)


def test_compressed_index_needs_enough_names_and_keeps_most_neighbours():
    with pytest.raises(BabelinkError, match="ivfpq index needs at least"):
        DenseNameIndex.build(_unit(100), DenseParams(kind="ivfpq"))
    vectors = _unit(12_000, dim=16)
    exact = DenseNameIndex.build(vectors).search(vectors[:50], 10)[0]
    compressed_index = DenseNameIndex.build(vectors, DenseParams(kind="ivfpq", pq_bytes=8, nprobe=16))
    compressed = compressed_index.search(vectors[:50], 10)[0]
    with pytest.raises(BabelinkError, match="ivfpq index keeps lossy codes"):  # not a KB name's vector
        StoredNameVectors(None, compressed_index)
    overlap = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(exact, compressed)])
    assert overlap > 0.5


def test_corrupt_index_file_names_the_file(tmp_path):
    DenseNameIndex.build(_unit(10)).save(tmp_path)
    (tmp_path / "faiss.index").write_bytes(b"garbage")
    with pytest.raises(BabelinkError, match="faiss.index.*unreadable"):
        DenseNameIndex.load(tmp_path)
