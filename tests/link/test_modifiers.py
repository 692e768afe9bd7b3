"""`link` leaves out words that only qualify a mention; `normalize` still answers them."""

from dataclasses import replace

import pytest

from babelink.bundle.store import build_bundle
from babelink.kb.base import KnowledgeBaseBuilder
from babelink.link.modifiers import MODIFIER_TYPES, concept_types, is_modifier
from babelink.linker import Linker

CONCEPTS = {  # id: (names, types)
    "C0205082": (["Severe"], ["HP:0012823"]),  # HPO Clinical modifier
    "C0205191": (["Chronic"], ["T079"]),  # UMLS Temporal Concept
    "C0004096": (["Asthma"], ["T047"]),
    "C0030193": (["Pain"], []),  # untyped: the KB says nothing, so it stays a mention
    "C9999999": (["Relapsing"], ["HP:0012823", "HP:0000118"]),  # a modifier and a phenotype: a mention
    "C0205189": (["Borderline"], ["HP:0012823", "DISO"]),  # a join made it DISO: the group is no evidence
    "C0011849": (["Diabetes"], ["DISO"]),  # a group alone: a mention
}
TEXT = "Severe asthma. The pain was severe and chronic, relapsing."


@pytest.fixture(scope="module")
def linker(tmp_path_factory):
    builder = KnowledgeBaseBuilder()
    for concept_id, (names, types) in CONCEPTS.items():
        builder.add_names(concept_id, [(name, "PT") for name in names], lang="en", source="TEST")
        builder.add_concept(concept_id, types=types)
    path = build_bundle(builder.build(), tmp_path_factory.mktemp("bundles") / "typed", retriever="sparse")
    return Linker.open(path, link_threshold=0.9)


def _found(document):
    return [(mention.text, mention.concept.concept_id) for mention in document.mentions]


def test_modifier_concepts_are_those_with_only_modifier_types(linker):
    types = concept_types(linker.bundle.kb)
    assert [c for c in CONCEPTS if is_modifier(c, types, MODIFIER_TYPES)] == ["C0205082", "C0205191", "C0205189"]
    assert not any(is_modifier(c, types, frozenset()) for c in CONCEPTS)


def test_link_leaves_modifiers_out_and_keeps_them_when_asked(linker):
    assert _found(linker.link(TEXT)) == [("asthma", "C0004096"), ("pain", "C0030193"), ("relapsing", "C9999999")]
    keeping = linker.with_options(link_params=replace(linker.link_params, modifier_types=frozenset()))
    assert _found(keeping.link(TEXT)) == [("Severe", "C0205082"), ("asthma", "C0004096"), ("pain", "C0030193"),
                                          ("severe", "C0205082"), ("chronic", "C0205191"),
                                          ("relapsing", "C9999999")]


def test_normalize_still_answers_a_modifier(linker):
    assert linker.normalize("severe")[0].concept_id == "C0205082"


def test_modifier_types_take_any_collection_but_not_a_string():
    from babelink.errors import InvalidInputError
    from babelink.link.documents import LinkParams

    assert LinkParams(modifier_types=["T080"]).modifier_types == frozenset({"T080"})
    with pytest.raises(InvalidInputError, match="not the string 'T080'"):
        LinkParams(modifier_types="T080")
    with pytest.raises(InvalidInputError, match="overlap must be one of best, longest, got 'longst'"):
        LinkParams(overlap="longst")
