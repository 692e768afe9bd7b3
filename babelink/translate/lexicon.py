"""Bilingual lexicons (English ↔ another language) read from TSV files and stored in a bundle.

Translation knowledge is the cross-lingual signal of 001 §2.2; there it trains the encoder, here
it also renders a query into English at search time (`translate.render`). A lexicon file has one
pair per line, `english<TAB>foreign` (the MUSE layout, `en-XX.tsv`); a word with several
translations has several lines, and their order ranks the senses (MUSE lists frequent words
first). Both sides are normalised as KB names are (`text.normalize_name`), so lookups compare
normalised mention tokens with normalised entries.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import stopwordsiso

from babelink.errors import BabelinkError, InputFormatError
from babelink.fsutil import array_values, read_parquet
from babelink.lang import UMLS_TO_ISO, to_iso
from babelink.text import normalize_name
from babelink.textio import iter_lines

#: A file named `en-XX.tsv` (or `.txt`, `.tsv.gz`) holds English–XX pairs.
_FILE_NAME = re.compile(r"^en[-_](?P<lang>[A-Za-z]{2,3})\.(?:tsv|txt)(?:\.gz)?$")
#: The languages a lexicon may be for: every code babelink knows (stop-word lists, UMLS `LAT`).
KNOWN_LANGUAGES = frozenset(stopwordsiso.langs()) | frozenset(UMLS_TO_ISO.values())
TABLE = "lexicon.parquet"


@dataclass(frozen=True)
class LexiconSource:
    """One file a lexicon was read from, as the bundle manifest records it."""

    lang: str
    file: str
    sha256: str
    pairs: int


class Lexicon:
    """Per language, each normalised foreign word's English renderings, best sense first.

    A loaded lexicon keeps its pairs as one dictionary-encoded Arrow table and builds a
    language's lookup table on first use: a bundle with 15 languages costs memory only for the
    languages its queries are in."""

    def __init__(self, senses: dict[str, dict[str, tuple[str, ...]]] | None = None,
                 sources: Sequence[LexiconSource] = (), table: pa.Table | None = None):
        self._senses = senses if senses is not None else {}
        self.sources = list(sources)
        self._table = table
        self._rows: dict[str, tuple[int, int]] = _language_rows(table) if table is not None else {}
        self.languages = sorted(set(self._rows) | set(self._senses))

    def entries(self, lang: str) -> dict[str, tuple[str, ...]]:
        if lang not in self._senses:
            self._senses[lang] = self._entries_from_table(lang)
        return self._senses[lang]

    def _entries_from_table(self, lang: str) -> dict[str, tuple[str, ...]]:
        if lang not in self._rows:
            return {}
        start, stop = self._rows[lang]
        rows = self._table.slice(start, stop - start)
        entries: dict[str, tuple[str, ...]] = {}
        for foreign, english in zip(rows.column("foreign").to_pylist(), rows.column("english").to_pylist()):
            entries[foreign] = entries.get(foreign, ()) + (english,)
        return entries

    def followed_by(self, other: Lexicon) -> Lexicon:
        """This lexicon's senses first and `other`'s after them, per language: a user's dictionary
        leads, a KB-mined one (`translate.mining`) or the bundle's own fills its gaps."""
        senses = {}
        for lang in sorted(set(self.languages) | set(other.languages)):
            merged = dict(self.entries(lang))
            for foreign, found in other.entries(lang).items():
                merged[foreign] = tuple(dict.fromkeys(merged.get(foreign, ()) + found))
            senses[lang] = merged
        return Lexicon(senses, list(dict.fromkeys([*self.sources, *other.sources])))  # a file given twice: once

    def summary(self) -> dict:
        """What the manifest records: languages, entries per language, and the files read."""
        return {
            "languages": {lang: len(self.entries(lang)) for lang in self.languages},
            "sources": [asdict(source) for source in self.sources],
        }

    def save(self, directory: Path) -> list[Path]:
        """One Parquet table `(lang, foreign, english, sense)`, dictionary-encoded: compact. Rows
        are grouped by language and each word's senses follow each other, best first: a
        language's entries are read back as one slice of the table."""
        rows = [(lang, foreign, english, rank) for lang in self.languages
                for foreign, renderings in self.entries(lang).items() for rank, english in enumerate(renderings)]
        columns = list(zip(*rows)) if rows else [[], [], [], []]
        table = pa.table({"lang": pa.array(columns[0], pa.string()), "foreign": pa.array(columns[1], pa.string()),
                          "english": pa.array(columns[2], pa.string()), "sense": pa.array(columns[3], pa.int16())})
        directory.mkdir(exist_ok=True)
        path = directory / TABLE
        pq.write_table(table, path, use_dictionary=True, compression="zstd")
        return [path]

    @classmethod
    def load(cls, directory: Path, sources: Sequence[dict] = ()) -> Lexicon:
        return cls(sources=[LexiconSource(**source) for source in sources],
                   table=read_parquet(directory / TABLE).combine_chunks())


def _language_rows(table: pa.Table) -> dict[str, tuple[int, int]]:
    """Each language's `[start, stop)` rows in a table `Lexicon.save` wrote. Found from the
    dictionary codes rather than by comparing strings in `pyarrow.compute`, which imports pandas
    (0.15 s of a CLI call that renders a mention)."""
    if table.num_rows == 0:
        return {}
    codes = table.column("lang").combine_chunks().dictionary_encode()
    indices = array_values(codes.indices)
    starts = np.flatnonzero(np.diff(indices, prepend=-1))
    if len(starts) != len(codes.dictionary):
        raise ValueError("lexicon table: a language's rows are not contiguous")
    stops = [*starts[1:], len(indices)]
    return {codes.dictionary[int(indices[start])].as_py(): (int(start), int(stop))
            for start, stop in zip(starts, stops, strict=True)}


def read_lexicons(specs: Iterable[str | Path]) -> Lexicon:
    """Read lexicon files into one `Lexicon`.

    Each spec is a file named `en-XX.tsv`, a directory of such files, or `XX=PATH` for a file
    named otherwise (a clinical glossary). Malformed lines raise `InputFormatError` with the file
    and line; a file without pairs, or for a language babelink does not know, is an error."""
    senses: dict[str, dict[str, tuple[str, ...]]] = {}
    sources = []
    for lang, path in _files(specs):
        pairs = _read_pairs(path, senses.setdefault(lang, {}))
        sources.append(LexiconSource(lang, path.name, hashlib.sha256(path.read_bytes()).hexdigest(), pairs))
    return Lexicon(senses, sources)


def _files(specs: Iterable[str | Path]) -> list[tuple[str, Path]]:
    files = []
    for spec in specs:
        lang, separator, rest = str(spec).partition("=")
        if separator and re.fullmatch(r"[A-Za-z]{2,3}", lang):
            files.append((_language(lang, Path(rest)), Path(rest)))
            continue
        path = Path(spec)
        if path.is_dir():
            found = sorted(file for file in path.iterdir() if _FILE_NAME.match(file.name))
            if not found:
                raise BabelinkError(f"{path}: no en-XX.tsv lexicon files in this directory")
            files += [(_language(_FILE_NAME.match(file.name)["lang"], file), file) for file in found]
        elif match := _FILE_NAME.match(path.name):
            files.append((_language(match["lang"], path), path))
        elif not path.exists():
            raise InputFormatError(path, None, "no such file or directory")
        else:
            raise BabelinkError(f"{path}: cannot tell the lexicon's language; name the file en-XX.tsv "
                                f"or give it as XX={path}")
    return files


def _language(code: str, path: Path) -> str:
    lang = to_iso(code)
    if lang not in KNOWN_LANGUAGES or lang == "en":
        raise BabelinkError(f"{path}: {code!r} is not a language code babelink knows for an English–XX lexicon")
    return lang


def _read_pairs(path: Path, entries: dict[str, tuple[str, ...]]) -> int:
    """Add the file's pairs to `entries` (foreign → English senses, in file order); count them."""
    pairs = 0
    for number, line in iter_lines(path):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != 2 or not all(part.strip() for part in fields):
            raise InputFormatError(path, number, f"expected 'english<TAB>foreign', got {len(fields)} field(s)")
        english, foreign = (normalize_name(part) for part in fields)
        if not english or not foreign:
            continue  # punctuation only: nothing a normalised query could contain
        senses = entries.get(foreign, ())
        if english not in senses:
            entries[foreign] = senses + (english,)
        pairs += 1
    if pairs == 0:
        raise InputFormatError(path, None, "no 'english<TAB>foreign' pairs in this lexicon")
    return pairs
