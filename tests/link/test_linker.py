"""End-to-end linking of running text (`Linker.link`) with real sparse bundles."""

import tracemalloc

import pytest
from support import build_sparse_bundle

from babelink.errors import InputFormatError, InvalidInputError
from babelink.formats.document import Annotation, Document
from babelink.link.documents import split_segments
from babelink.link.mentions import LinkedDocument
from babelink.linker import Linker

NAMES = {
    "C0011849": ["Diabetes mellitus", "Diabetes", "糖尿病", "סוכרת", "Diabète sucré"],
    "C0020538": ["Hypertension", "High blood pressure", "高血压", "יתר לחץ דם", "Hypertension artérielle"],
    "C0027051": ["Myocardial infarction", "Heart attack", "心肌梗死"],
    "C0004096": ["Asthma", "Asma"],
    "C0015967": ["Fever", "High fever"],
    "C0023449": ["Acute lymphoblastic leukemia", "ALL"],
    "C0021081": ["Immune suppression", "IS"],
    "C0009421": ["Coma", "COMA"],
}


@pytest.fixture(scope="module")
def linker(tmp_path_factory):
    path = build_sparse_bundle(NAMES, tmp_path_factory.mktemp("bundles") / "sparse")
    return Linker.open(path, recall_threshold=0.5, link_threshold=0.8, overlap="best")


def _found(document):
    for mention in document.mentions:
        assert document.text[mention.start : mention.end] == mention.text
    return [(mention.text, mention.concept.concept_id) for mention in document.mentions]


def test_english_sentence(linker):
    text = "A patient with diabetes mellitus and high blood pressure had a heart attack."
    assert _found(linker.link(text)) == [("diabetes mellitus", "C0011849"), ("high blood pressure", "C0020538"),
                                         ("heart attack", "C0027051")]


def test_two_mentions_run_together_are_linked_each_on_its_own(tmp_path):
    # the longest span wins overlaps, and "diabetes and diabetes mellitus" scores 0.9 against
    # *Diabetes mellitus*, which holds "diabetes" once
    longest = Linker.open(build_sparse_bundle(NAMES, tmp_path / "sparse"), recall_threshold=0.5, link_threshold=0.8)
    assert _found(longest.link("History of diabetes and diabetes mellitus. Fever and high fever.")) == [
        ("diabetes", "C0011849"), ("diabetes mellitus", "C0011849"), ("Fever", "C0015967"),
        ("high fever", "C0015967")]


CONJOINED = {"C1": ["Nausea vomiting", "Náuseas vómitos"], "C2": ["Nausea", "Náuseas"], "C3": ["Vomiting", "Vómitos"],
             "C4": ["Head and neck cancer"], "C5": ["Cleft lip and palate", "Labio y paladar hendido"]}


@pytest.mark.parametrize(("text", "lang", "expected"), [
    ("Nausea and vomiting were frequent.", "en", [("Nausea", "C2"), ("vomiting", "C3")]),
    ("Náuseas y vómitos frecuentes.", "es", [("Náuseas", "C2"), ("vómitos", "C3")]),
    ("A head and neck cancer was found.", "en", [("head and neck cancer", "C4")]),  # the name has "and" too
    ("Un labio y paladar hendido.", "es", [("labio y paladar hendido", "C5")]),
])
def test_a_span_joining_two_mentions_by_a_conjunction_is_linked_only_to_a_name_with_one(tmp_path, text, lang,
                                                                                          expected):
    # "nausea and vomiting" scores 0.78 against *Nausea vomiting*, which has no conjunction: two mentions run
    # together, and the longest span would win the overlaps
    linker = Linker.open(build_sparse_bundle(CONJOINED, tmp_path / "sparse"), recall_threshold=0.5,
                         link_threshold=0.75)
    assert _found(linker.link(text, lang=lang)) == expected


def test_conjunctions_are_whole_words_of_the_language_and_of_english():
    from babelink.detect.conjunctions import conjunctions

    assert conjunctions("es") == {"y", "o", "and", "or"} and conjunctions("de") >= {"und", "oder"}
    assert conjunctions(None) == conjunctions("zh") == {"and", "or"}  # 和 is written joined to its items
    assert conjunctions("he") == {"and", "or", "או"}  # "or" is a word, "and" (ו) a prefix
    assert conjunctions("xx") == {"and", "or"}  # a language CLDR lacks


def test_chinese_sentence_offsets(linker):
    text = "患者有2型糖尿病和高血压。"
    document = linker.link(text)
    assert _found(document) == [("糖尿病", "C0011849"), ("高血压", "C0020538")]
    assert [(m.start, m.end) for m in document.mentions] == [(5, 8), (9, 12)]


def test_hebrew_sentence_offsets(linker):
    text = "לחולה יש סוכרת וגם יתר לחץ דם."
    document = linker.link(text, lang="he")
    assert _found(document) == [("סוכרת", "C0011849"), ("יתר לחץ דם", "C0020538")]
    assert document.mentions[1].start == text.index("יתר")


def test_offsets_survive_compatibility_characters(linker):
    text = "Ｄｉａｂｅｔｅｓ and ﬁve cases of asthma"  # fullwidth letters and a ligature: NFKC changes lengths
    document = linker.link(text)
    assert _found(document) == [("Ｄｉａｂｅｔｅｓ", "C0011849"), ("asthma", "C0004096")]


def test_acronym_links_but_the_stop_word_does_not(linker):
    found = _found(linker.link("Children with ALL were treated; all of them recovered.", lang="en"))
    assert found == [("ALL", "C0023449")]


@pytest.mark.parametrize("code", ["ENG", "eng", "en-US", "en_GB"])
def test_a_language_written_as_a_user_writes_it(linker, code):
    text = "Children with ALL were treated; all of them recovered."
    assert _found(linker.link(text, lang=code)) == _found(linker.link(text, lang="en")) == [("ALL", "C0023449")]


def test_a_word_given_as_the_language_is_an_error_not_a_text_without_stop_words(linker):
    with pytest.raises(InvalidInputError, match="document 'a': lang: 'english' is not a language code"):
        linker.link("all of them", lang="english", doc_id="a")
    with pytest.raises(InvalidInputError, match="lang: 'english'"):
        linker.normalize("fever", lang="english")


def test_abbreviation_defined_in_the_text(linker):
    text = "Acute lymphoblastic leukemia (AcLL) is common. AcLL relapses were rare."
    document = linker.link(text, lang="en")
    abbreviated = [m for m in document.mentions if m.text == "AcLL"]
    assert abbreviated and all(m.concept.concept_id == "C0023449" and m.searched for m in abbreviated)


@pytest.mark.parametrize("text", ["", "   \n\t ", "🙂🙂🙂", "%$#@!" * 100, "\x00\x01\x02 binary \xff\xfe"])
def test_texts_without_mentions(linker, text):
    assert linker.link(text).mentions == ()


def test_mixed_scripts_and_emoji(linker):
    found = _found(linker.link("🙂 asthma 🙂 糖尿病 🙂 סוכרת 🙂"))
    assert [concept for _, concept in found] == ["C0004096", "C0011849", "C0011849"]


def test_invalid_documents_raise_clear_errors(linker):
    with pytest.raises(InvalidInputError, match="not valid Unicode"):
        linker.link("asthma \ud800")
    with pytest.raises(InvalidInputError, match="text must be a string"):
        linker.link_documents([Document("d1", b"asthma")])


def test_segments_cut_at_barriers_and_cover_the_text():
    text = ("Asthma was seen. " * 400 + "\n\n") * 30
    segments = list(split_segments(text, size=5000))
    assert "".join(segment for _, segment in segments) == text
    assert all(len(segment) <= 5000 for _, segment in segments)
    assert all(text[offset:].startswith(segment) for offset, segment in segments)
    assert all(segment.endswith((". ", "\n")) for _, segment in segments[:-1])


def test_text_without_spaces_is_cut_after_a_full_stop():
    text = "患者有高血压。" * 2857 + "糖尿病" + "患者有高血压。" * 700
    segments = list(split_segments(text))
    assert "".join(segment for _, segment in segments) == text
    assert all(segment.endswith("。") for _, segment in segments[:-1])


def test_long_document_links_every_segment_with_bounded_memory(linker):
    sentence = "The patient had asthma and hypertension. "
    text = sentence * 25_000  # 1 MB
    tracemalloc.start()
    document = linker.link(text)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert len(document.mentions) == 50_000
    assert all(text[m.start : m.end] == m.text for m in document.mentions[::997])
    assert peak < 400 * 2**20


def test_batch_equals_one_by_one(linker):
    texts = ["asthma and diabetes", "心肌梗死", "High blood pressure."]
    batch = linker.link_documents([Document(str(i), t) for i, t in enumerate(texts)])
    assert [_found(d) for d in batch] == [_found(linker.link(t)) for t in texts]


def test_linked_document_serialisations(linker):
    document = linker.link("asthma and diabetes", doc_id="p1")
    record = document.to_dict()
    assert record["id"] == "p1"
    assert (
        record["mentions"][0] | {"start": 0, "end": 6, "text": "asthma", "concept": "C0004096"} == record["mentions"][0]
    )
    assert {"start", "end", "text", "concept", "name", "score"} <= set(record["mentions"][0])
    full = document.to_dict(with_candidates=True)
    assert LinkedDocument.from_dict(full, document.text).to_dict(with_candidates=True) == full  # the Ray round trip
    annotated = document.as_document("Disease")
    first = document.mentions[0]
    assert annotated.annotations[0] == Annotation(0, 6, "asthma", ("C0004096",), "Disease", infons=(
        ("score", f"{first.score:.4f}"), ("probability", f"{first.concept.probability:.4f}")))
    assert isinstance(annotated, Document)


def test_short_capitals_names_match_only_mentions_in_capitals(linker):
    assert _found(linker.link("The tumor is benign.", lang="en")) == []
    assert ("IS", "C0021081") in _found(linker.link("Signs of IS were absent.", lang="en"))
    assert all(c.matched_name != "IS" and c.score < 0.9 for c in linker.normalize("is", top_k=5))
    assert linker.normalize("IS", top_k=1)[0].concept_id == "C0021081"
    # a string the KB also writes in lower case matches any case
    assert linker.normalize("coma", top_k=1)[0].concept_id == "C0009421"
    assert ("coma", "C0009421") in _found(linker.link("He fell into a coma.", lang="en"))


@pytest.mark.parametrize("lang", ["en", None])
def test_a_text_all_in_capitals_reads_its_function_words_as_words(linker, lang):
    """In a heading or a shouted note, IS and ALL are the words, not immune suppression and acute
    lymphoblastic leukaemia; a text that defines the short form still links it."""
    assert _found(linker.link("THE FEVER IS HIGH AND ALL OF IT WAS BAD.", lang=lang)) == [("FEVER", "C0015967")]
    assert ("IS", "C0021081") in _found(linker.link("Signs of IS were absent, the fever was high.", lang=lang))
    defined = _found(linker.link("IMMUNE SUPPRESSION (IS) WAS SEEN. IS IS RARE.", lang=lang))
    assert ("IS", "C0021081") in defined
    assert _found(linker.link("IS", lang=lang)) == [("IS", "C0021081")]  # a field of one word is no shouting


def test_a_mention_is_normalised_once_whatever_the_caller(linker, monkeypatch):
    """`normalize_each` is where a mention is validated and normalised; nothing before or after it
    (the CLI's line reader, calibration, the n-gram loop's whole-mention check) does it again,
    except a reader that stops at the first unusable mention: it checks each as it is read, so that
    the run stops before that mention's batch is searched."""
    from babelink import text
    from babelink.link.records import normalize_lines

    calls = []
    real = text.normalize_name
    monkeypatch.setattr(text, "normalize_name", lambda value: calls.append(value) or real(value))
    lines = [(1, "asthma", "asthma"), (2, "Diabetes", "Diabetes"), (3, "!!", "!!"), (4, "asthma", "asthma")]
    items = list(normalize_lines(linker, lines, 3, "<test>", skip_invalid=True, ngram_threshold=0.5))
    assert [item.result.error is None for item in items] == [True, True, False, True]
    assert calls == ["asthma", "Diabetes", "!!", "asthma"]
    searched = []
    monkeypatch.setattr(linker, "_normalize_keys", lambda *args: searched.append(args) or {})
    with pytest.raises(InputFormatError, match="<test>:3: mention '!!' is empty after normalisation"):
        list(normalize_lines(linker, lines, 3, "<test>"))
    assert not searched, "the run stopped before the batch holding line 3 was searched"
