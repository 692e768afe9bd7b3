"""Benchmark readers: inline fixtures for every rule and error, plus smoke checks on the shared data."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from babelink import textio
from babelink.errors import InputFormatError, InvalidInputError
from babelink.formats.brat import iter_brat, read_brat_document, write_brat
from babelink.formats.document import Annotation, Document, NormalizationQuery, mentions_from_documents
from babelink.formats.pubtator import iter_pubtator, write_pubtator
from babelink.formats.xlbel import read_xlbel


def write(path: Path, content: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8", newline="")
    return path


def assert_error_at(error: pytest.ExceptionInfo, path: Path, line: int | None) -> None:
    assert error.value.path == str(path)
    assert error.value.line == line
    assert str(path) in str(error.value)


# --- XL-BEL ----------------------------------------------------------------------------------


def test_xlbel_v0_reads_alternative_gold_ids_and_infers_the_language(tmp_path):
    path = write(tmp_path / "es_1k_test_query.txt", "C0003864||poliartritis\nC2275750|C1033372||Malaxis\n\n")
    assert read_xlbel(path) == [
        NormalizationQuery("poliartritis", ("C0003864",), lang="es"),
        NormalizationQuery("Malaxis", ("C2275750", "C1033372"), lang="es"),
    ]


def test_xlbel_v1_keeps_the_context_and_accepts_an_explicit_language(tmp_path):
    path = write(tmp_path / "all_1k_test_query_with_context.txt", "C0026391||moluscos||de <tgt>moluscos</tgt> .\n")
    (query,) = read_xlbel(path)
    assert query.context == "de <tgt>moluscos</tgt> ."
    assert query.lang is None
    assert read_xlbel(path, lang="SPA")[0].lang == "es"


@pytest.mark.parametrize(
    ("content", "line"),
    [
        (b"C0003864||poliartritis\nC0026391 moluscos\n", 2),  # missing separator
        (b"C0003864||poliartritis\nC0026391||\n", 2),  # missing mention
        (b"C0003864||poliartritis\nC0026391||molus\xffcos\n", 2),  # invalid UTF-8
    ],
)
def test_xlbel_malformed_rows_name_file_and_line(tmp_path, content, line):
    path = write(tmp_path / "es_1k_test_query.txt", content)
    with pytest.raises(InputFormatError) as error:
        read_xlbel(path)
    assert_error_at(error, path, line)


# --- PubTator --------------------------------------------------------------------------------

PUBTATOR = (
    "100|t|Copper toxicosis in dogs.\n"
    "100|a|Breast and ovarian cancer is rare.\n"
    "100\t0\t16\tCopper toxicosis\tSpecificDisease\tOMIM:215600\n"
    "100\t26\t51\tBreast and ovarian cancer\tCompositeMention\tD001943| D010051\n"
    "100\t37\t51\tovarian cancer\tModifier\tMESH:D010051 \n"
    "100\t0\t6\tCopper\tChemical\t-1\n"
    "100\tCID\tD003300\tD010051\n"
    "\n"
    "200|t|Hemorrhagic cystitis\n"
    "200|a|\n"
    "200\t0\t20\tHemorrhagic cystitis\tDisease\tD006470+D003556\tHemorrhagic|cystitis\n"
)


def test_pubtator_reads_documents_with_composite_and_missing_ids(tmp_path):
    first, second = iter_pubtator(write(tmp_path / "corpus.txt", PUBTATOR))
    assert first.id == "100"
    assert first.text == "Copper toxicosis in dogs.\nBreast and ovarian cancer is rare."
    assert [annotation.concept_ids for annotation in first.annotations] == [
        ("OMIM:215600",),
        ("D001943", "D010051"),
        ("D010051",),
        (),
    ]
    assert first.annotations[1] == Annotation(
        26, 51, "Breast and ovarian cancer", ("D001943", "D010051"), "CompositeMention"
    )
    assert second.annotations[0].concept_ids == ("D006470", "D003556")
    assert all(document.text[a.start : a.end] == a.text for document in (first, second) for a in document.annotations)


def test_pubtator_round_trips_through_the_writer(tmp_path):
    documents = list(iter_pubtator(write(tmp_path / "corpus.txt", PUBTATOR)))
    stream = io.StringIO()
    write_pubtator(documents, stream)
    assert list(iter_pubtator(write(tmp_path / "copy.txt", stream.getvalue()))) == documents


def test_pubtator_writes_any_document_so_that_offsets_still_hold(tmp_path):
    document = Document("d1", "Title\nline one\nline\ttwo", (Annotation(11, 19, "one\nline", ("C0000001",)),))
    stream = io.StringIO()
    write_pubtator([document], stream)
    (read_back,) = iter_pubtator(write(tmp_path / "out.txt", stream.getvalue()))
    assert read_back.text == "Title\nline one line two"
    assert read_back.annotations[0].text == "one line"


def test_pubtator_streams_documents_before_reaching_a_bad_block(tmp_path):
    path = write(tmp_path / "corpus.txt", PUBTATOR.replace("200\t0\t20\t", "200\t0\t20x\t"))
    documents = iter_pubtator(path)
    assert next(documents).id == "100"
    with pytest.raises(InputFormatError) as error:
        next(documents)
    assert_error_at(error, path, 11)


@pytest.mark.parametrize(
    ("old", "new", "line"),
    [
        ("100\t0\t16\tCopper", "100\t1\t17\tCopper", 3),  # offsets point at other text
        ("100\t37\t51\t", "100\t37\t510\t", 5),  # span beyond the text
        ("\tModifier\tMESH:D010051 \n", "\n", 5),  # too few fields
        ("100\t0\t6\tCopper", "101\t0\t6\tCopper", 6),  # annotation of another document
        ("200|a|\n", "200|a|\n200|a|\n", 11),  # second abstract
        ("100|a|", "100|x|", 2),  # neither text nor annotation
        ("100\t37\t51\t", "100\tx37\t51\t", 5),  # a malformed start is no relation line
    ],
)
def test_pubtator_malformed_rows_name_file_and_line(tmp_path, old, new, line):
    assert old in PUBTATOR
    path = write(tmp_path / "corpus.txt", PUBTATOR.replace(old, new))
    with pytest.raises(InputFormatError) as error:
        list(iter_pubtator(path))
    assert_error_at(error, path, line)


def test_an_overlong_line_is_refused_before_it_fills_memory(tmp_path, monkeypatch):
    monkeypatch.setattr(textio, "MAX_LINE_BYTES", 64)
    path = write(tmp_path / "corpus.txt", PUBTATOR.replace("100|a|", "100|a|" + "x" * 100, 1))
    with pytest.raises(InputFormatError, match="line longer than") as error:
        list(iter_pubtator(path))
    assert_error_at(error, path, 2)


def test_pubtator_invalid_utf8_names_the_line(tmp_path):
    path = write(
        tmp_path / "corpus.txt", PUBTATOR.encode().replace(b"Hemorrhagic cystitis\n200|a|", b"H\xe9morrhagic\n200|a|")
    )
    with pytest.raises(InputFormatError) as error:
        list(iter_pubtator(path))
    assert_error_at(error, path, 9)


# --- brat ------------------------------------------------------------------------------------

MANTRA_TXT = "Tome PROTELOS por via oral.\n"
MANTRA_ANN = (
    "T5\tC1721214 5 13\tPROTELOS\n"
    '#5\tAnnotatorNotes T5\t"C1721214", "protelos", "Organic Chemical" ,"CHEM"\n'
    "T6\tC1533734 18 26\tvia oral\n"
)
QUAERO_TXT = "Douleur de l' épaule\r\net arthroscopie de l' épaule.\n"
QUAERO_ANN = (
    "T1\tDISO 0 7;11 20\tDouleur l' épaule\n"
    "#1\tAnnotatorNotes T1\tC0008100 C0008059\n"
    "T2\tPROC 25 50\tarthroscopie de l' épaule\n"
    "#2\tAnnotatorNotes T2\tC0559702\t\n"
    "T3\tANAT 44 50\tépaule\n"
    "#3\tAnnotatorNotes T3\tC21983864\n"
    "T4\tANAT 14 20\tépaule\n"
    "R1\tPart-of Arg1:T3 Arg2:T2\n"
    "A1\tNegated T1\n"
    "*\tEquiv T3 T4\n"
)


def test_brat_takes_the_cui_from_the_type_field(tmp_path):
    txt = write(tmp_path / "0001_d326.u54.txt", MANTRA_TXT)
    write(tmp_path / "0001_d326.u54.ann", MANTRA_ANN)
    document = read_brat_document(txt)
    assert document.id == "0001_d326.u54"
    assert document.lang is None
    assert document.annotations == (
        Annotation(5, 13, "PROTELOS", ("C1721214",), "C1721214"),
        Annotation(18, 26, "via oral", ("C1533734",), "C1533734"),
    )


def test_brat_takes_cuis_from_notes_and_keeps_discontinuous_fragments(tmp_path):
    txt = write(tmp_path / "doc.txt", QUAERO_TXT)
    write(tmp_path / "doc.ann", QUAERO_ANN)
    pain, arthroscopy, malformed_note, no_note = read_brat_document(txt).annotations
    assert pain == Annotation(0, 20, "Douleur l' épaule", ("C0008100", "C0008059"), "DISO", ((0, 7), (11, 20)))
    assert arthroscopy.concept_ids == ("C0559702",)
    assert arthroscopy.start == 25  # the \r counts: offsets are into the file as it is
    assert malformed_note.concept_ids == ()
    assert no_note.concept_ids == ()


def test_iter_brat_walks_sorted_paths_with_relative_ids(tmp_path):
    write(tmp_path / "b" / "doc.txt", QUAERO_TXT)
    write(tmp_path / "b" / "doc.ann", QUAERO_ANN)
    write(tmp_path / "a" / "0001_d326.u54.txt", MANTRA_TXT)
    write(tmp_path / "a" / "0001_d326.u54.ann", MANTRA_ANN)
    write(tmp_path / "README.txt", "not a document\n")
    write(tmp_path / "top.txt", "")
    write(tmp_path / "top.ann", "")
    assert [document.id for document in iter_brat(tmp_path)] == ["a/0001_d326.u54", "b/doc", "top"]
    assert [document.id for document in iter_brat(tmp_path, recursive=False)] == ["top"]


def test_brat_round_trips_through_the_writer(tmp_path):
    write(tmp_path / "in" / "sub" / "doc.txt", QUAERO_TXT)
    write(tmp_path / "in" / "sub" / "doc.ann", QUAERO_ANN)
    write(tmp_path / "in" / "mantra.txt", MANTRA_TXT)
    write(tmp_path / "in" / "mantra.ann", MANTRA_ANN)
    documents = list(iter_brat(tmp_path / "in"))
    for document in documents:
        write_brat(document, tmp_path / "out")
    assert list(iter_brat(tmp_path / "out")) == documents


def test_write_brat_round_trips_ids_of_any_kb(tmp_path):
    text = "Copper and seizures in Crohn disease"
    document = Document(
        "d",
        text,
        (
            Annotation(0, 6, "Copper", ("D003300",), "Chemical"),
            Annotation(11, 19, "seizures", ("HP:0001250", "MESH:D012640"), "Disease"),
            Annotation(23, 36, "Crohn disease", ("MESH:D003424", "C0010346", "OMIM:266600", "ICD10:K50.9"), "Disease"),
            Annotation(23, 28, "Crohn", ("D000069283",), "Disease"),
        ),
    )
    write_brat(document, tmp_path)
    assert (tmp_path / "d.ann").read_text(encoding="utf-8").splitlines()[
        3
    ] == "#2\tAnnotatorNotes T2\tHP:0001250 MESH:D012640"
    assert read_brat_document(tmp_path / "d.txt") == document


def test_brat_mention_text_is_its_slice_but_for_what_would_break_the_line(tmp_path):
    text = "heart\u00a0failure, heart\tfailure"
    document = Document("d", text, (Annotation(0, 13, text[0:13], ("C1",), "Disease"),
                                    Annotation(15, 28, text[15:28], ("C1",), "Disease")))
    write_brat(document, tmp_path)
    fields = [line.split("\t")[2] for line in (tmp_path / "d.ann").read_text(encoding="utf-8").splitlines()
              if line.startswith("T")]
    assert fields == ["heart\u00a0failure", "heart failure"]
    assert [a.text for a in read_brat_document(tmp_path / "d.txt").annotations] == fields


@pytest.mark.parametrize("doc_id", ["/etc/x", "../x", "a/../../x", "a//b", "", "x\0y", "."])
def test_write_brat_refuses_ids_that_name_no_file_under_the_directory(tmp_path, doc_id):
    with pytest.raises(InvalidInputError, match="cannot be a file name"):
        write_brat(Document(doc_id, "text"), tmp_path / "out")
    assert not any(tmp_path.rglob("*.txt"))


def test_write_brat_keeps_nested_ids_as_the_reader_gives_them(tmp_path):
    write_brat(Document("sub/doc.1", "text"), tmp_path)
    assert [d.id for d in iter_brat(tmp_path, recursive=True)] == ["sub/doc.1"]


@pytest.mark.parametrize(
    ("note", "ids"),
    [
        ("MESH:D003924  HP:0001250", ("MESH:D003924", "HP:0001250")),  # an id list: every token is an id
        ("D003924 C0008100 D003924", ("D003924", "C0008100")),
        ('"C1721214", "protelos", "CHEM"', ("C1721214",)),  # free text: the CUIs of its first field with any
        ("C0035946+", ("C0035946",)),
        ("see HP:0001250 and C0008100", ("C0008100",)),  # not an id list, and free text yields CUIs only
        ("C153057", ()),  # a truncated CUI, not a bare MeSH supplementary id
        ("", ()),
    ],
)
def test_brat_notes_give_an_id_list_or_the_cuis_in_free_text(tmp_path, note, ids):
    txt = write(tmp_path / "doc.txt", "Copper\n")
    write(tmp_path / "doc.ann", f"T1\tChemical 0 6\tCopper\n#1\tAnnotatorNotes T1\t{note}\n")
    assert read_brat_document(txt).annotations[0].concept_ids == ids


@pytest.mark.parametrize(
    ("old", "new", "line"),
    [
        ("PROC 25 50", "PROC 25 500", 3),  # span beyond the text
        ("PROC 25 50", "PROC 26 51", 3),  # offsets point at other text
        ("DISO 0 7;11 20", "DISO 0 7;11 x", 1),  # bad fragment
        ("T4\tANAT 14 20\tépaule", "T4\tANAT", 7),  # missing field
        ("A1\tNegated", "Q1\tNegated", 9),  # unknown line kind
    ],
)
def test_brat_malformed_rows_name_file_and_line(tmp_path, old, new, line):
    assert old in QUAERO_ANN
    txt = write(tmp_path / "doc.txt", QUAERO_TXT)
    ann = write(tmp_path / "doc.ann", QUAERO_ANN.replace(old, new))
    with pytest.raises(InputFormatError) as error:
        read_brat_document(txt)
    assert_error_at(error, ann, line)


def test_brat_invalid_utf8_and_missing_ann_name_the_file(tmp_path):
    txt = write(tmp_path / "doc.txt", b"first line\nbad \xff byte\n")
    write(tmp_path / "doc.ann", "")
    with pytest.raises(InputFormatError) as error:
        read_brat_document(txt)
    assert_error_at(error, txt, 2)
    lonely = write(tmp_path / "lonely.txt", "text\n")
    with pytest.raises(InputFormatError) as error:
        read_brat_document(lonely)
    assert_error_at(error, tmp_path / "lonely.ann", None)


# --- queries from documents ------------------------------------------------------------------


def test_mentions_from_documents_keeps_linked_mentions_of_the_chosen_types(tmp_path):
    documents = [
        Document(
            "d1",
            "Copper toxicosis",
            (
                Annotation(0, 16, "Copper toxicosis", ("D1", "D2"), "Disease"),
                Annotation(0, 6, "Copper", ("D3",), "Chemical"),
                Annotation(7, 16, "toxicosis", (), "Disease"),
            ),
            lang="en",
        )
    ]
    assert mentions_from_documents(documents) == [
        NormalizationQuery("Copper toxicosis", ("D1", "D2"), lang="en", context="Copper toxicosis", doc_id="d1"),
        NormalizationQuery("Copper", ("D3",), lang="en", context="Copper toxicosis", doc_id="d1"),
    ]
    assert [query.mention for query in mentions_from_documents(documents, types={"Disease"})] == ["Copper toxicosis"]


# --- shared data -----------------------------------------------------------------------------


def test_real_xlbel_spanish(shared_data):
    bench = shared_data / "bench" / "xl_bel"
    queries = read_xlbel(bench / "xlbel_v0.0" / "es_1k_test_query.txt")
    assert len(queries) == 1000
    assert {query.lang for query in queries} == {"es"}
    assert sum(len(query.gold_ids) > 1 for query in queries) == 69
    with_context = read_xlbel(bench / "xlbel_v1.0" / "es_1k_test_query_with_context.txt")
    assert all(f"<tgt>{query.mention}</tgt>" in query.context for query in with_context)
    assert {(q.gold_ids, q.mention) for q in with_context} == {(q.gold_ids, q.mention) for q in queries}


def test_real_ncbi_disease_test(shared_data):
    documents = list(iter_pubtator(shared_data / "bench" / "ncbi_disease" / "NCBItestset_corpus.txt"))
    annotations = [annotation for document in documents for annotation in document.annotations]
    assert len(documents) == 100
    assert len(annotations) == 960
    assert sum(len(annotation.concept_ids) > 1 for annotation in annotations) == 15
    assert len(mentions_from_documents(documents)) == 960


def test_real_ncbi_train_reads_despite_its_quirks(shared_data):
    # A duplicated PMID, a mention column with trailing spaces, a `MESH:` prefix, stray spaces.
    documents = list(iter_pubtator(shared_data / "bench" / "ncbi_disease" / "NCBItrainset_corpus.txt"))
    assert (len(documents), len({document.id for document in documents})) == (593, 592)
    assert sum(len(document.annotations) for document in documents) == 5145


def test_real_bc5cdr_test_diseases(shared_data):
    documents = list(iter_pubtator(shared_data / "bench" / "bc5cdr" / "CDR_TestSet.PubTator.txt"))
    diseases = [a for document in documents for a in document.annotations if a.type == "Disease"]
    assert (len(documents), len(diseases)) == (500, 4424)
    assert len(mentions_from_documents(documents, types={"Disease"})) == 4424 - 61


def test_real_mantra_spanish(shared_data):
    documents = list(iter_brat(shared_data / "bench" / "mantra_gsc" / "Mantra-GSC" / "Spanish"))
    annotations = [annotation for document in documents for annotation in document.annotations]
    assert (len(documents), len(annotations)) == (200, 432 + 324)
    assert all(annotation.concept_ids == (annotation.type,) for annotation in annotations)
    assert documents[0].id.startswith("EMEA_ec22-cui-best_man/")


def test_real_quaero_train_emea(shared_data):
    documents = list(iter_brat(shared_data / "bench" / "quaero" / "corpus" / "train" / "EMEA"))
    annotations = [annotation for document in documents for annotation in document.annotations]
    assert (len(documents), len(annotations)) == (11, 2695)
    assert sum(bool(annotation.fragments) for annotation in annotations) == 27
    assert sum(bool(annotation.concept_ids) for annotation in annotations) == 2691


def test_a_pubtator_file_opening_with_a_blank_line_is_read_as_pubtator(tmp_path):
    from babelink.formats.inputs import read_input_documents

    path = tmp_path / "NCBIdevelopset_corpus.txt"
    path.write_text("\n\n1|t|Asthma.\n1|a|In children.\n\n2|t|Gout.\n2|a|\n", encoding="utf-8")
    assert [document.id for document in read_input_documents(path)] == ["1", "2"]
    (tmp_path / "notes.txt").write_text("\n\nAsthma in children.\n", encoding="utf-8")
    assert [document.id for document in read_input_documents(tmp_path / "notes.txt")] == ["notes"]
