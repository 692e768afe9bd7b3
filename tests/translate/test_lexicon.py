"""Lexicon files: layouts, languages, malformed lines, and the round trip through a bundle directory."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from babelink.errors import BabelinkError, InputFormatError
from babelink.translate.lexicon import Lexicon, read_lexicons


def write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def test_reads_senses_in_file_order_normalised(tmp_path):
    lexicon = read_lexicons([write(tmp_path / "en-es.tsv", "heart\tCorazón\ncore\tcorazón\nheart\tcorazon\n")])
    assert lexicon.languages == ["es"]
    assert lexicon.entries("es") == {"corazón": ("heart", "core"), "corazon": ("heart",)}
    assert lexicon.sources[0].pairs == 3 and lexicon.sources[0].file == "en-es.tsv"


def test_directory_and_named_glossary(tmp_path):
    folder = tmp_path / "muse"
    folder.mkdir()
    write(folder / "en-de.tsv", "heart\therz\n")
    write(folder / "en-ja.txt", "diabetes\t糖尿病\n")
    write(folder / "README.md", "not a lexicon")
    glossary = write(tmp_path / "clinical.tsv", "myocardial infarction\tinfarto agudo de miocardio\n")
    lexicon = read_lexicons([folder, f"es={glossary}"])
    assert lexicon.languages == ["de", "es", "ja"]
    assert lexicon.entries("es")["infarto agudo de miocardio"] == ("myocardial infarction",)


def test_malformed_line_names_file_and_line(tmp_path):
    path = write(tmp_path / "en-fr.tsv", "heart\tcoeur\nno tab here\n")
    with pytest.raises(InputFormatError, match=r"en-fr.tsv:2: expected 'english<TAB>foreign'"):
        read_lexicons([path])


@pytest.mark.parametrize("content", ["", "\n\n", "...\t!!!\n"])
def test_a_lexicon_without_pairs_is_an_error(tmp_path, content):
    with pytest.raises(InputFormatError, match="no 'english<TAB>foreign' pairs"):
        read_lexicons([write(tmp_path / "en-fr.tsv", content)])


def test_unknown_or_missing_language_is_an_error(tmp_path):
    with pytest.raises(BabelinkError, match="not a language code"):
        read_lexicons([write(tmp_path / "en-qq.tsv", "a\tb\n")])
    with pytest.raises(BabelinkError, match="cannot tell the lexicon's language"):
        read_lexicons([write(tmp_path / "glossary.tsv", "a\tb\n")])
    with pytest.raises(InputFormatError, match="no such file"):
        read_lexicons([tmp_path / "absent.tsv"])
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(BabelinkError, match="no en-XX.tsv lexicon files"):
        read_lexicons([empty])


def test_broken_utf8_names_the_line(tmp_path):
    path = tmp_path / "en-de.tsv"
    path.write_bytes(b"heart\therz\nlung\tl\xffunge\n")
    with pytest.raises(InputFormatError, match="en-de.tsv:2: invalid UTF-8"):
        read_lexicons([path])


def test_save_and_load_round_trip(tmp_path):
    lexicon = read_lexicons([write(tmp_path / "en-es.tsv", "heart\tcorazón\ncore\tcorazón\nlung\tpulmón\n"),
                             write(tmp_path / "en-zh.tsv", "diabetes\t糖尿病\n")])
    lexicon.save(tmp_path / "bundle")
    loaded = Lexicon.load(tmp_path / "bundle", lexicon.summary()["sources"])
    assert loaded.languages == ["es", "zh"]
    assert loaded.entries("es") == lexicon.entries("es")
    assert loaded.summary() == lexicon.summary()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.text(min_size=1, max_size=8), st.text(min_size=1, max_size=8)), min_size=1, max_size=6))
def test_any_tsv_reads_or_fails_with_a_line(tmp_path_factory, pairs):
    path = tmp_path_factory.mktemp("lexicon") / "en-it.tsv"
    path.write_text("".join(f"{english}\t{foreign}\n" for english, foreign in pairs), encoding="utf-8",
                    errors="surrogatepass")
    try:
        lexicon = read_lexicons([path])
    except InputFormatError as error:
        assert "en-it.tsv" in str(error)
    else:
        assert all(senses for senses in lexicon.entries("it").values())
