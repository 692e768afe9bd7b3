import gzip

import pytest

from babelink.errors import InputFormatError
from babelink.kb.ctd import read_ctd
from babelink.kb.readers import infer_format, read_kb
from babelink.kb.store import load_kb, save_kb
from babelink.kb.tabular import read_jsonl, read_tsv
from babelink.kb.umls import read_umls

MRCONSO = """\
C0027051|ENG|P|L1|PF|S1|Y|A1||||MSH|MH|D009203|Myocardial Infarction|0|N||
C0027051|ENG|S|L2|PF|S2|N|A2||||MSH|ET|D009203|Heart Attack|0|N||
C0027051|SPA|P|L3|PF|S3|Y|A3||||MSHSPA|MH|D009203|Infarto del Miocardio|0|N||
C0027051|ENG|S|L4|PF|S4|N|A4||||MSH|ET|D009203|old attack name|0|O||
C0011849|ENG|P|L5|PF|S5|Y|A5||||MSH|MH|D003920|Diabetes Mellitus|0|N||
C0011849|GER|P|L6|PF|S6|Y|A6||||MSHGER|MH|D003920|Diabetes mellitus|0|N||
"""


def write(path, text, *, gz=False):
    data = text.encode("utf-8")
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def test_umls_reader_keys_by_cui_and_filters(tmp_path):
    kb = read_umls(write(tmp_path / "MRCONSO.RRF", MRCONSO))
    assert len(kb) == 2 and kb.num_names == 5  # the suppressed (O) atom is skipped
    assert kb.preferred_name("C0027051") == "Myocardial Infarction"
    assert kb.languages() == {"en": 3, "es": 1, "de": 1}
    spanish = read_umls(tmp_path / "MRCONSO.RRF", languages=frozenset({"es"}))
    assert len(spanish) == 1 and spanish.preferred_name("C0027051") == "Infarto del Miocardio"
    assert read_umls(tmp_path / "MRCONSO.RRF", sources={"MSHGER"}).num_names == 1
    assert read_umls(tmp_path / "MRCONSO.RRF", term_types={"ET"}).num_names == 1
    assert read_umls(tmp_path / "MRCONSO.RRF", include_suppressed=True).num_names == 6


@pytest.mark.parametrize(("mrconso_gz", "mrsty_gz"), [(True, True), (True, False), (False, True)])
def test_umls_reader_gzip_and_semantic_types(tmp_path, mrconso_gz, mrsty_gz):
    """MRSTY beside MRCONSO is read whether either is gzipped."""
    write(tmp_path / ("MRCONSO.RRF.gz" if mrconso_gz else "MRCONSO.RRF"), MRCONSO, gz=mrconso_gz)
    write(tmp_path / ("MRSTY.RRF.gz" if mrsty_gz else "MRSTY.RRF"),
          "C0027051|T047|B2.2.1.2.1|Disease or Syndrome|AT1|256|\n", gz=mrsty_gz)
    kb = read_umls(tmp_path / ("MRCONSO.RRF.gz" if mrconso_gz else "MRCONSO.RRF"))
    types = dict(zip(kb.concepts.column("concept_id").to_pylist(), kb.concepts.column("types").to_pylist()))
    assert types == {"C0027051": ["T047"], "C0011849": []}


def test_a_gzip_with_corrupt_compressed_data_is_an_error_naming_it(tmp_path):
    data = bytearray(gzip.compress((MRCONSO * 50).encode()))
    data[40:48] = b"\xff" * 8
    (tmp_path / "MRCONSO.RRF.gz").write_bytes(bytes(data))
    with pytest.raises(InputFormatError, match=r"MRCONSO.RRF.gz: cannot read"):
        read_umls(tmp_path / "MRCONSO.RRF.gz")


def test_umls_reader_reports_malformed_row_with_line(tmp_path):
    path = write(tmp_path / "MRCONSO.RRF", MRCONSO + "C0000001|ENG|P|too short\n")
    with pytest.raises(InputFormatError, match=r"MRCONSO.RRF:7: expected 18"):
        read_umls(path)


def test_reader_reports_invalid_utf8_with_line(tmp_path):
    path = tmp_path / "MRCONSO.RRF"
    path.write_bytes(MRCONSO.encode() + b"C0000001|ENG|P|L|PF|S|Y|A||||MSH|MH|D1|caf\xe9|0|N||\n")
    with pytest.raises(InputFormatError, match=r"MRCONSO.RRF:7: invalid UTF-8"):
        read_umls(path)


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(InputFormatError, match="no such file"):
        read_kb(tmp_path / "absent.tsv")


CTD = """\
# Fields:
# DiseaseName\tDiseaseID\tAltDiseaseIDs\tDefinition\tParentIDs\tTreeNumbers\tParentTreeNumbers\tSynonyms\tSlimMappings
Wilson Disease\tMESH:D006527\tDO:DOID:893|OMIM:277900\t\tMESH:D1\tC1\tC\t\
Hepatolenticular Degeneration|Wilson's disease\tMetabolic disease
Asthma\tMESH:D001249\t\t\t\t\t\t\t
"""


def test_ctd_reader_resolves_alternative_ids(tmp_path):
    kb = read_ctd(write(tmp_path / "CTD_diseases.tsv.gz", CTD, gz=True))
    assert len(kb) == 2 and kb.num_names == 4
    assert kb.resolve("OMIM:277900") == "MESH:D006527"
    assert kb.resolve("MESH:D001249") == "MESH:D001249"
    assert kb.resolve("OMIM:1") is None
    assert kb.preferred_name("MESH:D006527") == "Wilson Disease"


def test_ctd_reader_reports_malformed_row(tmp_path):
    path = write(tmp_path / "CTD_diseases.tsv", CTD + "Broken row\tMESH:D1\n")
    with pytest.raises(InputFormatError, match=r"CTD_diseases.tsv:5: expected at least 8"):
        read_ctd(path)


def test_ctd_reader_refuses_a_disease_id_on_two_rows(tmp_path):
    path = write(tmp_path / "CTD_diseases.tsv", CTD + "Asthma again\tMESH:D001249\t\t\t\t\t\t\t\n")
    with pytest.raises(InputFormatError, match=r"CTD_diseases.tsv:5: DiseaseID MESH:D001249 again \(first at line 4\)"):
        read_ctd(path)


def test_tsv_reader(tmp_path):
    path = write(tmp_path / "vocab.tsv", "id\tname\tlang\tpreferred\nX1\tFever\ten\ttrue\nX1\tFiebre\tSPA\t0\n")
    kb = read_tsv(path)
    assert kb.languages() == {"en": 1, "es": 1} and kb.preferred_name("X1") == "Fever"
    with pytest.raises(InputFormatError, match=r"vocab.tsv:1: header"):
        read_tsv(write(tmp_path / "vocab.tsv", "code_name\tlabel\nX1\tFever\n"))
    with pytest.raises(InputFormatError, match=r"bad.tsv:2: field 'preferred'"):
        read_tsv(write(tmp_path / "bad.tsv", "id\tname\tpreferred\nX1\tFever\tmaybe\n"))


@pytest.mark.parametrize(
    ("content", "line", "message"),
    [
        ("id\tname\tname\nC1\tasthma\tasma\n", 1, "column 'name' appears more than once"),
        ("id\tname\nC1\tasthma\tstray\n", 2, "expected 2 tab-separated fields, found 3"),
        ("id\tname\nC1\tasthma\n", None, None),
        ("id\tname\nC1\tasthma\t\n", None, None),  # a trailing tab is no extra column
        ("id\tname\tlang\nC1\tasthma\tENG\nC2\tasma\tpt-BR\nC3\tastma\tenglish\n", 4, "'english' is not a language"),
        ("id\tname\tlang\nC1\tasthma\tzz\n", 2, "'zz' is not a language code"),
        ("id\tname\tnotes\nC1\tasthma\tx\n", 1, "unknown column 'notes'; the columns are id, name, lang"),
        ("id\tcui\tname\nC1\tC2\tasthma\n", 1, "two id columns"),
        ("id\tname\nC1\t \n", 2, "the name must be a non-empty string"),
        ("id\tname\n\x07\tasthma\n", 2, "holds a control character"),
        ("id\tname\nC\u20281\tasthma\n", 2, "or a line break"),
        ("id\tname\t\nC1\tasthma\t\n", None, None),  # a spreadsheet's trailing tab, header included
    ],
)
def test_tsv_reader_rejects_malformed_headers_and_rows(tmp_path, content, line, message):
    path = tmp_path / "kb.tsv"
    path.write_text(content)
    if message is None:
        assert len(read_tsv(path)) == 1
        return
    with pytest.raises(InputFormatError, match=message) as caught:
        read_tsv(path)
    assert f"{path}:{line}" in str(caught.value)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("id\tname\nC1\t---\nC2\t!?\n", "no name has a letter or digit"),
        ("id\tname\tlang\nC1\tasma\tes\n", "no concepts read"),
    ],
)
def test_kb_that_leaves_nothing_to_search_names_the_file(tmp_path, content, message):
    path = tmp_path / "kb.tsv"
    path.write_text(content)
    with pytest.raises(InputFormatError, match=message) as caught:
        read_kb(path, languages=frozenset({"en"}))
    assert str(path) in str(caught.value)


def test_tsv_lists_comments_and_ids_that_start_with_a_hash(tmp_path):
    path = write(tmp_path / "vocab.tsv", "# my vocabulary, v2\nid\tname\tsynonyms\ttypes\txrefs\n"
                                         "#42\tFever\tPyrexia | fever|\tSign\tUMLS:C0015967\n")
    kb = read_tsv(path)
    assert kb.names.column("name").to_pylist() == ["Fever", "Pyrexia"]
    assert kb.concepts.to_pylist()[0] | {"preferred_name": None} == {
        "concept_id": "#42", "preferred_name": None, "types": ["Sign"], "xrefs": ["UMLS:C0015967"], "alt_ids": []}


def test_jsonl_nulls_are_absent_and_blank_synonyms_are_left_out(tmp_path):
    path = write(tmp_path / "vocab.jsonl", '{"id": " X1 ", "name": "Head\\tache", "source": null, "lang": null, '
                                           '"preferred": null, "synonyms": ["", "  ", "Cephalalgia"]}\n')
    kb = read_jsonl(path)
    assert kb.names.column("name").to_pylist() == ["Head ache", "Cephalalgia"]
    assert set(kb.names.column("source").to_pylist()) == {""} and kb.concepts.column("concept_id").to_pylist() == ["X1"]
    with pytest.raises(InputFormatError, match=r"bad.jsonl:1: field 'source' must be a string"):
        read_jsonl(write(tmp_path / "bad.jsonl", '{"id": "X1", "name": "Fever", "source": 3}\n'))
    with pytest.raises(InputFormatError, match=r"bad.jsonl:1: the id 'X\\t1' holds a control character"):
        read_jsonl(write(tmp_path / "bad.jsonl", '{"id": "X\\t1", "name": "Fever"}\n'))
    assert read_jsonl(write(tmp_path / "alias.jsonl", '{"id": null, "cui": "C2", "name": "Fever"}\n')
                      ).concepts.column("concept_id").to_pylist() == ["C2"]
    with pytest.raises(InputFormatError, match=r"two.jsonl:1: two ids \(id, cui\)"):
        read_jsonl(write(tmp_path / "two.jsonl", '{"id": "C1", "cui": "C2", "name": "Fever"}\n'))


def test_jsonl_reader(tmp_path):
    path = write(
        tmp_path / "vocab.jsonl",
        '{"id": "X1", "name": "Fever", "synonyms": ["Pyrexia"], "xrefs": ["UMLS:C0015967"]}\n\n'
        '{"id": "X2", "name": "Fiebre", "lang": "es"}\n',
    )
    kb = read_jsonl(path)
    assert kb.num_names == 3 and len(kb) == 2
    with pytest.raises(InputFormatError, match=r"bad.jsonl:2: invalid JSON"):
        read_jsonl(write(tmp_path / "bad.jsonl", '{"id": "X1", "name": "Fever"}\n{"id": \n'))
    with pytest.raises(InputFormatError, match=r"bad.jsonl:1: lang: 'english' is not a language code"):
        read_jsonl(write(tmp_path / "bad.jsonl", '{"id": "X1", "name": "Fever", "lang": "english"}\n'))
    with pytest.raises(InputFormatError, match=r"bad.jsonl:1: field 'synonyms'"):
        read_jsonl(write(tmp_path / "bad.jsonl", '{"id": "X1", "name": "Fever", "synonyms": "Pyrexia"}\n'))


def test_store_round_trip_and_language_selection(tmp_path):
    kb = read_umls(write(tmp_path / "MRCONSO.RRF", MRCONSO))
    save_kb(kb, tmp_path / "store")
    loaded = load_kb(tmp_path / "store")
    assert loaded.content_hash() == kb.content_hash()
    assert infer_format(tmp_path / "store") == "parquet"
    german = read_kb(tmp_path / "store", languages=frozenset({"de"}))
    assert len(german) == 1 and german.num_names == 1
    [concept_id] = german.concepts.column("concept_id").to_pylist()
    [german_name] = german.names.column("name").to_pylist()
    assert german.preferred_name(concept_id) == german_name  # the English one is gone: the kept name
    assert german.preferred_name(concept_id) == read_umls(tmp_path / "MRCONSO.RRF",
                                                          languages=frozenset({"de"})).preferred_name(concept_id)


@pytest.mark.parametrize(
    ("name", "expected"),
    [("MRCONSO.RRF", "umls"), ("MRCONSO.RRF.gz", "umls"), ("CTD_diseases.tsv.gz", "ctd"), ("hp.obo", "obo"),
     ("my.tsv", "tsv"), ("my.jsonl.gz", "jsonl")],
)
def test_infer_format(tmp_path, name, expected):
    assert infer_format(tmp_path / name) == expected


def test_open_umls_at_scale(shared_data, tmp_path):
    kb = read_kb(shared_data / "kb" / "open-umls" / "MRCONSO.RRF")
    assert (len(kb), kb.num_names) == (34_413, 239_857)
    assert kb.preferred_name("C0011849") == "Diabetes mellitus"
    save_kb(kb, tmp_path)
    assert load_kb(tmp_path).num_names == 239_857
