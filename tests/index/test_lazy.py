"""The lazy dense index: no name encoded at build, the TF-IDF shortlist ranked by the encoder with
the names' vectors encoded once and kept across runs."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import CountingEncoder, kb_of

from babelink.bundle.store import build_bundle, load_bundle
from babelink.encoders import open_encoder
from babelink.encoders.vector_store import FILE, VectorStore, encode_through, store_directory, string_keys
from babelink.errors import BabelinkError, BundleError
from babelink.index import approximate
from babelink.index.dense import DenseParams
from babelink.linker import Linker
from babelink.retrieve.generators import HybridGenerator


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("BABELINK_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.fixture
def kb():
    return kb_of({
        "C1": ["Myocardial infarction", "Heart attack", "Infarto de miocardio"],
        "C2": ["Diabetes mellitus", "Diabetes"],
        "C3": ["Asthma", "Asma bronquial"],
        "C4": ["Arterial hypertension", "Hipertensión arterial"],
    })


def test_store_keeps_vectors_across_instances(tmp_path):
    rng = np.random.default_rng(0)
    calls = []

    def encode(texts):
        calls.append(list(texts))
        return rng.standard_normal((len(texts), 4)).astype(np.float32)

    store = VectorStore(tmp_path, 4)
    first = encode_through(store, encode, ["a", "b", "a", "c"])
    assert len(calls) == 1 and sorted(calls[0]) == ["a", "b", "c"] and np.array_equal(first[0], first[2])
    again = encode_through(store, encode, ["c", "b"])
    assert len(calls) == 1 and np.array_equal(again, first[[3, 1]])  # pending, not yet saved
    store.save()
    reopened = VectorStore(tmp_path, 4)
    assert len(reopened) == 3
    assert np.array_equal(encode_through(reopened, encode, ["a", "b", "c"]), first[[0, 1, 3]])
    assert len(calls) == 1


def test_concurrent_saves_merge(tmp_path):
    one, two = VectorStore(tmp_path, 2), VectorStore(tmp_path, 2)
    one.add(string_keys(["x"]), np.ones((1, 2)))
    two.add(string_keys(["y"]), np.zeros((1, 2)))
    one.save()
    two.save()
    found, vectors = VectorStore(tmp_path, 2).lookup(string_keys(["x", "y", "z"]))
    assert found.tolist() == [True, True, False] and vectors[0].tolist() == [1.0, 1.0]


@pytest.mark.parametrize("damage", ["truncate", "other dimension", "garbage"])
def test_an_unusable_store_file_is_ignored_and_replaced(tmp_path, capsys, damage):
    store = VectorStore(tmp_path, 3)
    store.add(string_keys(["x", "y"]), np.eye(3, dtype=np.float32)[:2])
    store.save()
    path = tmp_path / FILE
    if damage == "truncate":
        path.write_bytes(path.read_bytes()[:-5])
    elif damage == "garbage":
        path.write_bytes(b"\xff" * 100)
    reopened = VectorStore(tmp_path, 4 if damage == "other dimension" else 3)
    assert len(reopened) == 0 and "ignoring" in capsys.readouterr().err
    reopened.add(string_keys(["z"]), np.ones((1, reopened.dimension)))
    reopened.save()
    assert len(VectorStore(tmp_path, reopened.dimension)) == 1


def test_store_is_per_encoder_identity():
    entry = {"name": "default", "path": "/a", "fingerprint": "f1", "dimension": 384, "pooling": "mean"}
    assert store_directory(entry) == store_directory({**entry, "path": "/moved", "name": "/elsewhere"})
    assert store_directory(entry) != store_directory({**entry, "fingerprint": "f2"})
    assert store_directory(entry) != store_directory({**entry, "pooling": "cls"})


def test_lazy_bundle_encodes_the_fit_s_names_at_build_and_each_shortlisted_name_once(kb, tmp_path, home,
                                                                                     tiny_encoder_dir, monkeypatch):
    monkeypatch.setattr(approximate, "FIT_NAMES", 2)
    path = build_bundle(kb, tmp_path / "lazy", encoder=tiny_encoder_dir, dense_params=DenseParams(kind="lazy"))
    bundle = load_bundle(path)
    assert bundle.dense.encoded() == 2  # at build, only the names the token vectors were fitted to
    counting = CountingEncoder(bundle.encoder())
    linker = Linker(bundle, encoder=counting)
    assert isinstance(linker.generator, HybridGenerator)
    linker.normalize(["infarto miocardio", "diabetes"], top_k=2)
    names = [text for call in counting.calls for text in call if text not in ("infarto miocardio", "diabetes")]
    assert names and len(names) == len(set(names))  # every shortlisted name encoded once
    assert set(names) <= set(bundle.names.strings)
    counting.calls.clear()
    linker.normalize(["infarto miocardio"], top_k=2)
    assert counting.calls == []  # the mention is cached, its shortlist stored
    bundle.dense.store.save()
    again = load_bundle(path)
    second = CountingEncoder(again.encoder())
    Linker(again, encoder=second).normalize(["diabetes"], top_k=2)
    assert second.calls == [] or all(text not in again.names.strings for call in second.calls for text in call)


def test_lazy_ranks_like_a_flat_index_over_the_shortlist(kb, tmp_path, home, contextual_encoder_dir):
    """The same encoder's cosine over the same TF-IDF shortlist: the lazy bundle's ranking is the
    flat bundle's wherever the flat one's best names lie in the shortlist (here: all of them)."""
    lazy = Linker.open(build_bundle(kb, tmp_path / "lazy", encoder=contextual_encoder_dir,
                                    dense_params=DenseParams(kind="lazy")))
    flat = Linker.open(build_bundle(kb, tmp_path / "flat", encoder=contextual_encoder_dir,
                                    dense_params=DenseParams(kind="flat")))
    for mention in ["hipertension arterial", "asma", "heart attack"]:
        got = [(c.concept_id, round(c.score, 4)) for c in lazy.normalize(mention, top_k=4)]
        want = [(c.concept_id, round(c.score, 4)) for c in flat.normalize(mention, top_k=4)]
        assert got == want[: len(got)] and got


def test_lazy_needs_the_hybrid_retriever(kb, tmp_path, home, tiny_encoder_dir):
    with pytest.raises(BabelinkError, match="hybrid"):
        build_bundle(kb, tmp_path / "b", retriever="dense", encoder=tiny_encoder_dir,
                     dense_params=DenseParams(kind="lazy"))


def test_lazy_refuses_an_encoder_of_another_dimension(kb, tmp_path, home, tiny_encoder_dir):
    bundle = load_bundle(build_bundle(kb, tmp_path / "lazy", encoder=tiny_encoder_dir,
                                      dense_params=DenseParams(kind="lazy")))

    class Wide(CountingEncoder):
        dimension = 7

    wide = Wide(open_encoder(tiny_encoder_dir))
    wide.dimension = 7
    with pytest.raises(BundleError, match="7-d"):
        bundle.dense.attach(wide)


def test_lazy_refuses_another_encoder_that_would_poison_the_store(kb, tmp_path, home, tiny_encoder_dir,
                                                                   contextual_encoder_dir):
    """Same dimension, another model: its vectors would be kept as the bundle's encoder's."""
    bundle = load_bundle(build_bundle(kb, tmp_path / "lazy", encoder=tiny_encoder_dir,
                                      dense_params=DenseParams(kind="lazy")))
    with pytest.raises(BundleError, match="fingerprint"):
        Linker(bundle, encoder=open_encoder(contextual_encoder_dir))
    with pytest.raises(BundleError, match="pooling"):
        Linker(bundle, encoder=open_encoder(tiny_encoder_dir, pooling="mean"))
    own = store_directory(bundle.manifest["dense"]["encoder"])  # the build's, holding the fit's names
    assert [path.name for path in (home / "name-vectors").iterdir()] == [own.name]


def test_reindexing_a_lazy_bundle_gives_the_flat_bundle_and_encodes_only_new_names(kb, tmp_path, home,
                                                                                   contextual_encoder_dir, monkeypatch):
    from babelink.bundle.update import reindex_bundle

    monkeypatch.setattr(approximate, "FIT_NAMES", 0)  # lone token vectors: no name encoded at build
    path = build_bundle(kb, tmp_path / "lazy", encoder=contextual_encoder_dir, dense_params=DenseParams(kind="lazy"))
    lazy = load_bundle(path)
    lazy.dense.vectors(np.arange(3))  # three names encoded on a first need
    lazy.dense.store.save()
    assert len(lazy.dense.store) == 3
    reindex_bundle(path, DenseParams(kind="flat"))
    reindexed = load_bundle(path, verify=True)
    assert reindexed.dense.params.kind == "flat" and reindexed.manifest["reindexed"][0]["from"] == "lazy"
    assert len(VectorStore(lazy.dense.store.directory, lazy.dense.dimension)) == len(lazy.names)
    flat = Linker.open(build_bundle(kb, tmp_path / "flat", encoder=contextual_encoder_dir,
                                    dense_params=DenseParams(kind="flat")))
    for mention in ["blood pressure high", "asthma attack", "infarto"]:  # dense hits the TF-IDF may not shortlist
        assert ([(c.concept_id, round(c.score, 4)) for c in Linker(reindexed).normalize(mention, top_k=4)]
                == [(c.concept_id, round(c.score, 4)) for c in flat.normalize(mention, top_k=4)])


def test_cli_update_index_and_its_errors(kb, tmp_path, home, tiny_encoder_dir):
    from support import babelink

    path = build_bundle(kb, tmp_path / "lazy", encoder=tiny_encoder_dir, dense_params=DenseParams(kind="lazy"))
    done = babelink("update", "--bundle", path, "--index", "hnsw")
    assert done.returncode == 0 and "hnsw index over 9 name strings" in done.stderr
    assert load_bundle(path).dense.params.kind == "hnsw"
    nothing = babelink("update", "--bundle", path)
    assert nothing.returncode != 0 and "nothing to do" in nothing.stderr and "Traceback" not in nothing.stderr
    sparse = build_bundle(kb, tmp_path / "sparse", retriever="sparse")
    refused = babelink("update", "--bundle", sparse, "--index", "flat")
    assert refused.returncode != 0 and "no encoder" in refused.stderr and "Traceback" not in refused.stderr


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=200), header=st.booleans())
def test_any_bytes_in_the_store_file_load_as_a_store_or_none(tmp_path, capsys, data, header):
    """A damaged cache is ignored (and said so), never a crash or vectors read from garbage."""
    path = tmp_path / FILE
    prefix = b"BLVEC001" + np.array([2, 3], dtype="<u8").tobytes() if header else b""
    path.write_bytes(prefix + data)
    store = VectorStore(tmp_path, 3)
    keys = np.frombuffer(data[:16], dtype="<u8") if len(data) >= 16 else None
    valid = header and len(data) == 2 * (8 + 12) and keys[0] < keys[1]
    assert len(store) == (2 if valid else 0)
    found, vectors = store.lookup(string_keys(["x"]))
    assert vectors.shape == (1, 3) and (found.any() or not vectors.any())


def test_info_shows_how_many_names_a_lazy_bundle_has_encoded(kb, tmp_path, home, tiny_encoder_dir, monkeypatch):
    import json

    from support import babelink

    monkeypatch.setattr(approximate, "FIT_NAMES", 0)
    path = build_bundle(kb, tmp_path / "lazy", encoder=tiny_encoder_dir, dense_params=DenseParams(kind="lazy"))
    before = json.loads(babelink("info", "--bundle", path).stdout)["name_vectors"]
    assert before["encoded"] == 0 and before["names"] == 9
    assert babelink("normalize", "--bundle", path, "--input", "-", stdin="diabetes\n").returncode == 0
    after = json.loads(babelink("info", "--bundle", path).stdout)["name_vectors"]
    assert 0 < after["encoded"] <= 9 and after["store"].startswith(str(home))
