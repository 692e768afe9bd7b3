"""Joining the concepts of several vocabularies: cross-references, shared codes, one-to-one names,
a cycle, a conflicting pair, and a joined KB that normalises to one concept with every code."""

from babelink.bundle.store import build_bundle
from babelink.kb.base import KnowledgeBaseBuilder
from babelink.kb.join import Link, crosswalk_links, join_concepts, one_to_one_name_links, vocabulary_of
from babelink.linker import Linker


def tiny_kb():
    builder = KnowledgeBaseBuilder()
    for concept_id, names, xrefs in [
        ("HP:1", [("Hypertension", "PT"), ("High blood pressure", "SY")], ["UMLS:C0020538"]),
        ("HP:2", [("Atrial septal defect", "PT")], ["ICD-10:Q21.1"]),
        ("HP:3", [("Patent foramen ovale", "PT")], ["ICD-10:Q21.1"]),  # conflicts with HP:2 over Q21.1
        ("HP:4", [("Coma", "PT")], ["UMLS:C0009421"]),
        ("HP:5", [("Unconsciousness", "PT")], ["UMLS:C0009421"]),  # shares a CUI with HP:4: one vocabulary
        ("ICD10:Q21.1", [("Atrial septal defect", "PT")], []),
        ("ICD10:I10", [("Essential hypertension", "PT")], ["MSH:D006973"]),
        ("MESH:D006973", [("Hypertension", "PT")], []),
        ("MESH:D001", [("Cold", "PT")], []),
        ("DRUG:1", [("Cold", "PT")], []),
    ]:
        builder.add_names(concept_id, names, lang="en", source=vocabulary_of(concept_id))
        builder.add_concept(concept_id, xrefs=xrefs)
    builder.add_names("MESH:D006973", [("Hipertensión", "PT")], lang="es", source="MSHSPA")
    return builder.build()


def test_vocabularies_are_recognised_under_their_usual_spellings():
    assert vocabulary_of("ICD-10:Q21.1") == vocabulary_of("ICD10:Q21.1") == "ICD10"
    assert vocabulary_of("MSH:D006973") == vocabulary_of("MESH:D006973") == "MESH"
    assert vocabulary_of("C0020538") == "ID"


def test_links_from_cross_references_and_names():
    kb = tiny_kb()
    crosswalk = {(link.first, link.second) for link in crosswalk_links(kb)}
    assert {("HP:2", "ICD10:Q21.1"), ("HP:3", "ICD10:Q21.1"), ("ICD10:I10", "MESH:D006973"),
            ("HP:4", "HP:5")} == crosswalk
    names = {(link.first, link.second) for link in one_to_one_name_links(kb, ("HP", "ICD10", "MESH"))}
    # "Cold" is a drug's name too, but drugs are not among the vocabularies joined by name
    assert names == {("HP:1", "MESH:D006973"), ("HP:2", "ICD10:Q21.1")}


def test_join_keeps_one_concept_per_vocabulary_and_counts_conflicts():
    kb = tiny_kb()
    links = [*crosswalk_links(kb), *one_to_one_name_links(kb, ("HP", "ICD10", "MESH"))]
    joined, report = join_concepts(kb, links)
    assert joined.resolve("ICD10:Q21.1") == "HP:2" and joined.resolve("HP:3") == "HP:3"
    assert joined.resolve("HP:5") == "HP:5"  # one vocabulary's two concepts stay two
    # HP:1 —name— MESH:D006973 —xref— ICD10:I10: one group, under the first concept's ID
    assert joined.resolve("MESH:D006973") == joined.resolve("ICD10:I10") == "HP:1"
    assert joined.preferred_name("HP:1") == "Hypertension"
    assert report.concepts_before == 10 and report.concepts_after == 7 and report.concepts_joined == 3
    assert report.joined_by == {"crosswalk": 2, "name": 1} and report.largest_group == 3
    assert report.conflicts == {"crosswalk": 2}  # HP:3 to Q21.1 (held by HP:2), HP:5 to HP:4
    assert joined.num_names == kb.num_names
    sources = {row["source"] for row in joined.names.to_pylist() if row["concept_id"] == "HP:1"}
    assert sources == {"HP", "MESH", "MSHSPA", "ICD10"}


def test_a_cycle_of_links_joins_once():
    kb = tiny_kb()
    cycle = [Link("HP:1", "MESH:D006973", "x"), Link("MESH:D006973", "ICD10:I10", "x"),
             Link("ICD10:I10", "HP:1", "x")]
    joined, report = join_concepts(kb, cycle)
    assert report.joined_by == {"x": 2} and report.conflicts == {} and len(joined) == len(kb) - 2


def test_unknown_ids_in_links_are_ignored():
    kb = tiny_kb()
    joined, report = join_concepts(kb, [Link("HP:1", "HP:404", "x")])
    assert len(joined) == len(kb) and report.joined_by == {}


def test_joined_bundle_answers_one_concept_with_every_code(tmp_path):
    kb = tiny_kb()
    joined, _ = join_concepts(kb, [*crosswalk_links(kb), *one_to_one_name_links(kb, ("HP", "ICD10", "MESH"))])
    before = Linker.open(build_bundle(kb, tmp_path / "before", retriever="sparse"))
    after = Linker.open(build_bundle(joined, tmp_path / "after", retriever="sparse"))
    assert [c.concept_id for c in before.normalize(["hypertension"], 2)[0]] == ["HP:1", "MESH:D006973"]
    top = after.normalize(["hypertension"], 2)[0]
    assert top[0].concept_id == "HP:1" and top[1].concept_id != "HP:1"
    codes = dict(top[0].codes)
    assert codes["HP"] == "HP:1" and codes["MESH"] == "D006973" and codes["ICD10"] == "I10"
    assert codes["UMLS"] == "C0020538" and "MSH" not in codes  # ICD-10's xref to a member is no second code
    assert after.normalize(["hipertensión"], 1)[0][0].concept_id == "HP:1"
