"""The held-out-language query set: a KB's names in one language, searched against the rest."""

from babelink.eval.benchmark import held_out_names_set
from babelink.kb.base import KnowledgeBaseBuilder


def _kb():
    builder = KnowledgeBaseBuilder()
    for concept, name, lang in [
        ("C1", "Hypertension", "en"), ("C1", "Hipertansiyon", "tr"), ("C1", "Hypertension", "fr"),
        ("C2", "Asthma", "en"), ("C2", "Astım", "tr"),
        ("C3", "Fever", "en"), ("C3", "Ateş", "tr"), ("C4", "Pyrexia", "en"), ("C4", "ATEŞ", "tr"),
        ("C5", "Diabetes", "tr"),  # spelled as an English name of another concept
        ("C6", "Diabetes mellitus", "en"), ("C6", "Diabetes", "en"),
        ("C7", "Kızamık", "tr"),  # a concept named in Turkish only
    ]:
        builder.add_name(concept, name, lang=lang)
    return builder.build()


def test_queries_are_names_of_the_language_absent_from_the_kb_they_are_searched_in():
    query_set, rest = held_out_names_set(_kb(), "tr", size=10)
    assert "tr" not in rest.languages() and "C7" not in rest and "C1" in rest
    gold = {query.mention: query.gold_ids for query in query_set.queries}
    # "Ateş" and "ATEŞ" are one string naming two concepts; "Diabetes" is in the rest as written;
    # "Kızamık" names a concept the rest does not hold.
    assert gold == {"Hipertansiyon": ("C1",), "Astım": ("C2",), "Ateş": ("C3", "C4")}
    assert {query.lang for query in query_set.queries} == {"tr"}
    assert query_set.read == 5


def test_the_sample_is_seeded_and_no_larger_than_asked():
    kb = _kb()
    first, _ = held_out_names_set(kb, "tr", size=2, seed=3)
    again, _ = held_out_names_set(kb, "tr", size=2, seed=3)
    assert len(first.queries) == 2 and first.queries == again.queries


def test_a_name_is_drawn_by_its_own_hash_so_a_new_candidate_leaves_the_rest_of_the_sample():
    builder = KnowledgeBaseBuilder()
    for index in range(40):
        builder.add_name(f"C{index}", f"name {index}", lang="en")
        builder.add_name(f"C{index}", f"ad {index}", lang="tr")
    before = {q.mention for q in held_out_names_set(builder.build(), "tr", size=10)[0].queries}
    builder.add_name("C0", "aa", lang="tr")  # one more candidate, sorted first: at most one drawn name gives way
    after = {q.mention for q in held_out_names_set(builder.build(), "tr", size=10)[0].queries}
    assert len(before) == len(after) == 10 and len(before & after) >= 9
    other_seed = {q.mention for q in held_out_names_set(builder.build(), "tr", size=10, seed=1)[0].queries}
    assert other_seed != after
