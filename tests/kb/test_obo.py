import pytest
from support import HPO_TOP

from babelink.errors import InputFormatError
from babelink.kb.obo import OboSynonym, iter_obo_terms

OBO = """\
format-version: 1.2
data-version: hp/releases/2025-01-16
synonymtypedef: layperson "layperson term"

[Term]
id: HP:0000003
name: Multicystic kidney dysplasia
alt_id: HP:0004715
def: "Multicystic dysplasia of the kidney." [https://orcid.org/0000-0002-0736-9199]
synonym: "Multicystic dysplastic kidney" EXACT []
synonym: "Cystic kidneys" RELATED layperson [ORCID:0000-0001-5208-3432]
synonym: "Kidney disease" BROAD []
synonym: "A \\"quoted\\" name" NARROW []
xref: UMLS:C3714581
xref: MEDDRA:10022016 "Inguinal hernia"
is_a: HP:0000107 ! Renal cyst

[Term]
id: HP:0000057
name: obsolete Clitoromegaly
is_obsolete: true
replaced_by: HP:0008665

[Typedef]
id: part_of
name: part of

[Term]
id: HP:0000118
name: Phenotypic abnormality
"""


def lines_of(text: str):
    return enumerate(text.splitlines(), start=1)


def test_terms_labels_synonyms_xrefs_and_obsolete():
    terms = list(iter_obo_terms(lines_of(OBO), "hp.obo"))
    assert [term.id for term in terms] == ["HP:0000003", "HP:0000057", "HP:0000118"]  # Typedef skipped
    kidney, obsolete, last = terms
    assert kidney.name == "Multicystic kidney dysplasia"
    assert kidney.line == 5
    assert kidney.alt_ids == ["HP:0004715"]
    assert kidney.synonyms == [
        OboSynonym("Multicystic dysplastic kidney", "EXACT", None),
        OboSynonym("Cystic kidneys", "RELATED", "layperson"),
        OboSynonym("Kidney disease", "BROAD", None),
        OboSynonym('A "quoted" name', "NARROW", None),
    ]
    assert kidney.xrefs == ["UMLS:C3714581", "MEDDRA:10022016"]
    assert not kidney.obsolete
    assert obsolete.obsolete and obsolete.replaced_by == ["HP:0008665"]
    assert last.name == "Phenotypic abnormality" and last.synonyms == []


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("[Term]\nname: no id here\n\n[Term]\nid: HP:1\n", 1, "without an 'id'"),
        ("[Term]\nid: HP:1\nname: A\nname: B\n", 4, "second 'name'"),
        ('[Term]\nid: HP:1\nsynonym: "unterminated EXACT []\n', 3, "malformed synonym"),
        ('[Term]\nid: HP:1\nsynonym: "scope missing" []\n', 3, "malformed synonym"),
        ("[Term]\nid: HP:1\nthis line has no tag\n", 3, "expected 'tag: value'"),
        ("[Term\nid: HP:1\n", 1, "malformed stanza header"),
        ("[Term]\nid: HP:1\nxref:\n", 3, "empty 'xref'"),
        ("[Term]\nid: HP:1\nname: A\n\n[Term]\nid: HP:1\nname: B\n", 5, "defined again \\(first at line 1\\)"),
    ],
)
def test_malformed_stanzas_name_the_line(text, line, message):
    with pytest.raises(InputFormatError, match=message) as caught:
        list(iter_obo_terms(lines_of(text), "bad.obo"))
    assert caught.value.line == line
    assert caught.value.path == "bad.obo"


def test_read_obo_builds_a_kb(tmp_path):
    from babelink.kb.obo import read_obo
    from babelink.kb.readers import read_kb

    (tmp_path / "hp.obo").write_text(OBO)
    kb = read_obo(tmp_path / "hp.obo")
    assert len(kb) == 2 and kb.num_names == 4  # BROAD/NARROW synonyms and the obsolete term left out
    assert kb.preferred_name("HP:0000003") == "Multicystic kidney dysplasia"
    assert kb.resolve("HP:0004715") == "HP:0000003"
    assert set(kb.names.column("source").to_pylist()) == {"HP"}
    assert read_kb(tmp_path / "hp.obo").content_hash() == kb.content_hash()
    (tmp_path / "bad.obo").write_text(OBO.replace("name: Phenotypic abnormality", "name: A\nname: B"))
    with pytest.raises(InputFormatError, match=r"bad.obo:31: second 'name'"):
        read_obo(tmp_path / "bad.obo")


BRANCHED = HPO_TOP + """
[Term]
id: HP:0012824
name: Severity
is_a: HP:0012823

[Term]
id: HP:0012828
name: Severe
is_a: HP:0012824 ! Severity

[Term]
id: HP:0001250
name: Seizure
is_a: HP:0000118

[Term]
id: HP:0002373
name: Febrile seizure
is_a: HP:0001250
is_a: HP:0012823 ! also filed as a modifier: both branches

[Term]
id: HP:0000002
name: obsolete Stature
is_obsolete: true
is_a: HP:0000118

[Term]
id: HP:9000001
name: Loop one
is_a: HP:9000002

[Term]
id: HP:9000002
name: Loop two
is_a: HP:9000001

[Term]
id: HP:9000003
name: Below a missing parent
is_a: HP:7777777
"""


def test_branches_are_the_roots_children_on_every_is_a_path():
    from babelink.kb.obo import term_branches

    branches = term_branches(iter_obo_terms(lines_of(BRANCHED), "hp.obo"))
    assert branches["HP:0000001"] == frozenset()  # the root
    assert branches["HP:0000118"] == {"HP:0000118"}  # a child of the root is its own branch
    assert branches["HP:0012828"] == {"HP:0012823"}  # two levels down
    assert branches["HP:0002373"] == {"HP:0000118", "HP:0012823"}
    assert "HP:0000002" not in branches  # obsolete
    assert branches["HP:9000001"] == branches["HP:9000002"] == frozenset()  # a cycle no root reaches
    assert branches["HP:9000003"] == frozenset()  # its parent is not in the file: a root of its own


def test_obo_concepts_carry_branches_and_type_another_kb_through_codes(tmp_path):
    from babelink.kb.obo import read_obo, read_obo_branches, types_from_ontology
    from babelink.kb.umls import read_umls

    (tmp_path / "hp.obo").write_text(BRANCHED)
    kb = read_obo(tmp_path / "hp.obo")
    types = dict(zip(kb.concepts.column("concept_id").to_pylist(), kb.concepts.column("types").to_pylist()))
    assert types["HP:0012828"] == ["HP:0012823"] and types["HP:0001250"] == ["HP:0000118"]
    # MRCONSO writes an HPO atom's code as HPO:HP:…; a concept without an HPO code gains nothing
    (tmp_path / "MRCONSO.RRF").write_text(
        "C0205082|ENG|P|L1|PF|S1|Y|A1||||HPO|PT|HP:0012828|Severe|0|N||\n"
        "C0036572|ENG|P|L2|PF|S2|Y|A2||||HPO|PT|HP:0001250|Seizure|0|N||\n"
        "C0036572|ENG|S|L3|PF|S3|N|A3||||MSH|MH|D012640|Seizures|0|N||\n"
        "C0004096|ENG|P|L4|PF|S4|Y|A4||||MSH|MH|D001249|Asthma|0|N||\n")
    umls = read_umls(tmp_path / "MRCONSO.RRF")
    typed, gained = types_from_ontology(umls, read_obo_branches(tmp_path / "hp.obo"))
    assert gained == 2
    types = dict(zip(typed.concepts.column("concept_id").to_pylist(), typed.concepts.column("types").to_pylist()))
    assert types == {"C0205082": ["HP:0012823"], "C0036572": ["HP:0000118"], "C0004096": []}
    assert typed.names.equals(umls.names)
    assert types_from_ontology(typed, read_obo_branches(tmp_path / "hp.obo"))[1] == 0  # typing twice adds nothing
