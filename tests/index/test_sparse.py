import numpy as np
import pytest
from support import kb_of

from babelink.index.names import NameTable
from babelink.index.sparse import TfidfNameIndex, TfidfParams
from babelink.kb.base import KnowledgeBaseBuilder
from babelink.retrieve.generators import ExactMatchGenerator, SparseGenerator
from babelink.text import normalize_name

TEN_NAMES = {
    "D1": ["Myocardial infarction", "Heart attack"],
    "D2": ["Diabetes mellitus", "Diabète sucré"],
    "D3": ["Hypertension", "High blood pressure"],
    "D4": ["Asthma"],
    "D5": ["Migraine", "Heart attack"],  # a name shared by two concepts
    "D6": ["Fever"],
}


def tiny_kb():
    return kb_of(TEN_NAMES)


def test_name_table_deduplicates_strings_and_keeps_all_concepts():
    kb = tiny_kb()
    table = NameTable.from_kb(kb)
    assert len(table) == 9  # "Heart attack" twice → one string
    row = table.lookup("heart attack")
    concept_ids = [kb.concepts.column("concept_id")[int(r)].as_py() for r in table.concepts_of(row)]
    assert concept_ids == ["D1", "D5"] and table.surfaces[row] == "Heart attack"


def test_name_table_flags_strings_the_kb_writes_only_in_short_capitals(tmp_path):
    builder = KnowledgeBaseBuilder()
    for concept_id, name in [("C1", "IS"), ("C2", "COMA"), ("C2", "Coma"), ("C3", "ACHONDROPLASIA"), ("C4", "AS 2")]:
        builder.add_name(concept_id, name)
    table = NameTable.from_kb(builder.build())
    flagged = {string for string, flag in zip(table.strings, table.capitals_only) if flag}
    assert flagged == {"is"}  # "coma" is also written in lower case; the others are not short single words
    table.save(tmp_path)
    assert NameTable.load(tmp_path).capitals_only.tolist() == table.capitals_only.tolist()


def test_vocabulary_does_not_collapse_on_a_tiny_kb():
    table = NameTable.from_kb(tiny_kb())
    index = TfidfNameIndex.fit(table.strings)
    # every 1–3-gram of every name is kept (min_df=1, max_df=1.0)
    assert len(index.vectorizer.terms) > 150
    rows, scores = index.search(["asthma", "diabetes melitus", "high bloodpressure"], 1)
    assert [table.strings[r] for r in rows[:, 0]] == ["asthma", "diabetes mellitus", "high blood pressure"]
    assert scores[0, 0] == pytest.approx(1.0) and 0.5 < scores[1, 0] < 1.0


@pytest.mark.parametrize(
    "params",
    [TfidfParams(), TfidfParams(analyzer="char", ngram_min=1, ngram_max=4, sublinear_tf=False, min_posting_limit=1)],
)
def test_shortlist_search_agrees_with_exhaustive_search(params):
    rng = np.random.default_rng(0)
    words = ["cardio", "myo", "pathy", "itis", "hepat", "nephr", "osis", "oma", "neuro", "gastr", "algia"]
    strings = sorted({" ".join(rng.choice(words, size=rng.integers(1, 4))) for _ in range(400)})
    queries = [" ".join(rng.choice(words, size=2)) + "s" for _ in range(50)]
    fast = TfidfNameIndex.fit(strings, params)
    slow = TfidfNameIndex.fit(strings, TfidfParams(**{**params.__dict__, "exhaustive": True}))
    _, fast_scores = fast.search(queries, 5)
    _, slow_scores = slow.search(queries, 5)
    # Same top-k scores; rows may differ only among equal scores (anagram strings tie).
    np.testing.assert_allclose(fast_scores, slow_scores, rtol=1e-5)


def test_a_remembered_shortlist_answers_as_a_fresh_search_would():
    """Searches repeated in any batch and for any k give what an index that never searched gives."""
    rng = np.random.default_rng(1)
    words = ["cardio", "myo", "pathy", "itis", "hepat", "nephr", "osis", "oma", "neuro", "gastr", "algia"]
    strings = sorted({" ".join(rng.choice(words, size=rng.integers(1, 4))) for _ in range(400)})
    queries = [" ".join(rng.choice(words, size=2)) for _ in range(30)] + ["zzzz", "cardio"]
    params = TfidfParams(pool=8, min_posting_limit=1, max_posting_fraction=0.05)
    index = TfidfNameIndex.fit(strings, params)
    for k, batch in [(4, queries[:20]), (8, queries[10:]), (2, queries[::-1]), (12, queries), (8, queries[:0])]:
        rows, scores = index.search(batch, k)
        fresh_rows, fresh_scores = TfidfNameIndex.fit(strings, params).search(batch, k)
        np.testing.assert_array_equal(rows, fresh_rows)
        np.testing.assert_array_equal(scores, fresh_scores)
    allowed = np.arange(len(strings)) % 3 == 0
    rows, _ = index.restricted(allowed).search(queries, 4)
    assert allowed[rows[rows >= 0]].all()  # not the unrestricted index's remembered shortlists


def test_a_batch_shortlisted_in_parallel_chunks_answers_as_one_product(monkeypatch):
    """Chunks of queries on several threads give each query the shortlist a single product gives."""
    from babelink.index import sparse

    rng = np.random.default_rng(2)
    words = ["cardio", "myo", "pathy", "itis", "hepat", "nephr", "osis", "oma", "neuro", "gastr", "algia"]
    strings = sorted({" ".join(rng.choice(words, size=rng.integers(1, 4))) for _ in range(400)})
    queries = [" ".join(rng.choice(words, size=rng.integers(1, 3))) for _ in range(101)] + ["zzzz"]
    params = TfidfParams(pool=8, min_posting_limit=1, max_posting_fraction=0.05)
    monkeypatch.setattr(sparse, "QUERIES_PER_CHUNK", 10**9)
    monkeypatch.setattr(sparse, "search_threads", lambda: 1)
    whole = TfidfNameIndex.fit(strings, params).search(queries, 8)
    monkeypatch.setattr(sparse, "QUERIES_PER_CHUNK", 7)  # 15 chunks, the last short
    monkeypatch.setattr(sparse, "MIN_QUERIES_PER_CHUNK", 1)
    monkeypatch.setattr(sparse, "search_threads", lambda: 3)
    chunked = TfidfNameIndex.fit(strings, params).search(queries, 8)
    np.testing.assert_array_equal(chunked[0], whole[0])
    np.testing.assert_array_equal(chunked[1], whole[1])


def test_index_save_load_round_trip(tmp_path):
    table = NameTable.from_kb(tiny_kb())
    index = TfidfNameIndex.fit(table.strings, TfidfParams(ngram_max=4))
    index.save(tmp_path)
    loaded = TfidfNameIndex.load(tmp_path)
    assert loaded.params == index.params
    assert (loaded.transform(["fiever"]) != index.transform(["fiever"])).nnz == 0
    assert loaded.search(["fiever"], 3)[0].tolist() == index.search(["fiever"], 3)[0].tolist()
    # Memory-mapped, read-only: a search, a filtered view and a rescoring must never write to them.
    assert not loaded.matrix.data.flags.writeable
    restricted = loaded.restricted(np.arange(len(table)) % 2 == 0)
    assert set(restricted.search(["heart attack", "fever"], 3)[0].ravel()) <= set(range(0, len(table), 2)) | {-1}


def test_bundles_that_stored_only_the_compressed_matrix_still_load(tmp_path):
    import scipy.sparse as sp

    from babelink.index.sparse import LEGACY_MATRIX_FILE

    index = TfidfNameIndex.fit(NameTable.from_kb(tiny_kb()).strings)
    index.save(tmp_path)
    for stored in tmp_path.glob("tfidf_*.npy"):
        stored.unlink()
    sp.save_npz(tmp_path / LEGACY_MATRIX_FILE, index.matrix, compressed=False)
    loaded = TfidfNameIndex.load(tmp_path)
    assert loaded.search(["heart atack"], 3)[1].tolist() == index.search(["heart atack"], 3)[1].tolist()


def test_stored_arrays_that_do_not_fit_together_are_an_error_naming_the_directory(tmp_path):
    index = TfidfNameIndex.fit(NameTable.from_kb(tiny_kb()).strings)
    index.save(tmp_path)
    np.save(tmp_path / "tfidf_postings.indices.npy", np.zeros(3, dtype=np.int32))
    with pytest.raises(ValueError, match=str(tmp_path)):
        TfidfNameIndex.load(tmp_path)


def test_unknown_ngrams_give_no_candidates():
    kb = tiny_kb()
    generator = SparseGenerator(kb, NameTable.from_kb(kb), TfidfNameIndex.fit(NameTable.from_kb(kb).strings))
    assert generator.generate(["ЖЖЖ"], 5) == [[]]


def test_generators_aggregate_per_concept_and_apply_threshold():
    kb = tiny_kb()
    table = NameTable.from_kb(kb)
    index = TfidfNameIndex.fit(table.strings)
    [candidates] = SparseGenerator(kb, table, index).generate(["heart attack"], 3)
    assert [c.concept_id for c in candidates[:2]] == ["D1", "D5"]
    assert candidates[0].name == "Myocardial infarction" and candidates[0].matched_name == "Heart attack"
    assert len({c.concept_id for c in candidates}) == len(candidates)
    [strict] = SparseGenerator(kb, table, index, threshold=0.99).generate(["heart attack"], 3)
    assert [c.concept_id for c in strict] == ["D1", "D5"]
    assert ExactMatchGenerator(kb, table).generate([normalize_name("DIABÈTE  sucré"), "diabete"], 5) == [
        [candidates_of(kb, "D2", "Diabète sucré")],
        [],
    ]


def candidates_of(kb, concept_id, matched):
    from babelink.retrieve.candidate import Candidate
    from babelink.text import normalize_name

    return Candidate(concept_id, kb.preferred_name(concept_id), matched, 1.0, codes=(("ID", concept_id),),
                     matched_string=normalize_name(matched))


def test_shared_names_list_the_concepts_they_are_the_preferred_name_of_first():
    builder = KnowledgeBaseBuilder()
    builder.add_name("C1", "Cancer genus", preferred=True)
    builder.add_name("C1", "Cancer")
    builder.add_name("C2", "Malignant neoplasm", preferred=True)
    builder.add_name("C2", "cancer")
    builder.add_name("C3", "CANCER", preferred=True)
    kb = builder.build()
    names = NameTable.from_kb(kb)
    ids = kb.concepts.column("concept_id").to_pylist()
    assert [ids[row] for row in names.concepts_of(names.lookup("cancer"))] == ["C3", "C1", "C2"]


def test_unseen_ngrams_count_in_the_query_norm(tmp_path):
    index = TfidfNameIndex.fit(["fever", "asthma", "heart attack"])
    rows, scores = index.search(["fever", "zzzz fever", "patient had fever"], 1)
    assert rows[:, 0].tolist() == [0, 0, 0]
    assert scores[0, 0] == pytest.approx(1.0, abs=1e-5)
    assert scores[1, 0] < 0.75 and scores[2, 0] < 0.75
    index.save(tmp_path)
    reloaded = TfidfNameIndex.load(tmp_path)
    assert reloaded.search(["zzzz fever"], 1)[1][0, 0] == pytest.approx(scores[1, 0])


def test_an_extended_index_finds_an_added_name_with_new_ngrams_at_cosine_one():
    index = TfidfNameIndex.fit(["fever", "gout", "abdominal pain"])
    grown = index.extended(["abdominal painq", "gout"])
    assert grown.matrix.shape[0] == 5 and len(grown.vectorizer.terms) > len(index.vectorizer.terms)
    rows, scores = grown.search(["abdominal painq", "abdominal pain"], 1)
    assert rows[:, 0].tolist() == [3, 2] and np.allclose(scores[:, 0], 1.0, atol=1e-5)
    assert (grown.matrix[:3, : index.matrix.shape[1]] != index.matrix).nnz == 0  # earlier rows as they were
    assert grown.matrix[:3, index.matrix.shape[1]:].nnz == 0
