"""One entry point over every KB reader, with the format inferred from the path when not given."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

from babelink.errors import BabelinkError, InputFormatError
from babelink.kb.base import KnowledgeBase
from babelink.text import normalize_name

FORMATS = ("umls", "ctd", "obo", "tsv", "jsonl", "parquet")  # the keys of `READERS`


def infer_format(path: Path) -> str:
    """`MRCONSO.RRF[.gz]` → umls, `CTD_diseases.tsv[.gz]` → ctd, `*.obo`, `*.tsv`, `*.jsonl`, a saved KB directory."""
    if path.is_dir():
        if (path / "names.parquet").is_file():
            return "parquet"
        if (path / "MRCONSO.RRF").is_file() or (path / "MRCONSO.RRF.gz").is_file():
            return "umls"
        raise InputFormatError(path, None, "directory holds neither MRCONSO.RRF nor a saved KB (names.parquet)")
    name = path.name.lower().removesuffix(".gz")
    if name.startswith("mrconso") or name.endswith(".rrf"):
        return "umls"
    if name.startswith("ctd_diseases"):
        return "ctd"
    suffix = Path(name).suffix.lstrip(".")
    if suffix in {"obo", "tsv", "jsonl"}:
        return suffix
    raise InputFormatError(
        path, None, f"cannot tell the KB format from the file name; pass --kb-format ({'|'.join(FORMATS)})"
    )


def read_kb(
    path: str | Path,
    kb_format: str | None = None,
    *,
    languages: frozenset[str] | None = None,
    sources: Collection[str] | None = None,
    term_types: Collection[str] | None = None,
) -> KnowledgeBase:
    """Read a KB in any supported format; `sources` / `term_types` apply to UMLS only. A KB that
    ends up with no concepts, or with no name that has a letter or digit, is an error naming the file."""
    path = Path(path)
    if not path.exists():
        raise InputFormatError(path, None, "no such file or directory")
    kb_format = kb_format or infer_format(path)
    if (sources or term_types) and kb_format != "umls":
        raise BabelinkError("--source and --term-type filter UMLS MRCONSO files only")
    kb = _read(path, kb_format, languages, sources, term_types)
    if len(kb) == 0:
        given = [f"{option} {','.join(sorted(value))}" for option, value in (
            ("--lang", languages), ("--source", sources), ("--term-type", term_types)) if value]
        why = f"none passes {', '.join(given)}" if given else "it holds no name rows"
        raise InputFormatError(path, None, f"no concepts read: {why}")
    if not any(normalize_name(name) for name in kb.names.column("name").to_pylist()):
        raise InputFormatError(path, None, "no name has a letter or digit: nothing to search")
    return kb


def _read(path: Path, kb_format: str, languages, sources, term_types) -> KnowledgeBase:
    if kb_format not in READERS:
        raise BabelinkError(f"unknown KB format {kb_format!r}; expected one of {', '.join(FORMATS)}")
    return READERS[kb_format](path, languages, sources, term_types)


def _umls(path: Path, languages, sources, term_types) -> KnowledgeBase:
    from babelink.kb.umls import read_umls

    mrconso = path if path.is_file() else next(p for p in (path / "MRCONSO.RRF", path / "MRCONSO.RRF.gz")
                                               if p.is_file())
    return read_umls(mrconso, languages=languages, sources=sources, term_types=term_types)


def _ctd(path: Path, languages, *_) -> KnowledgeBase:
    from babelink.kb.ctd import read_ctd

    return read_ctd(path, languages=languages)


def _obo(path: Path, languages, *_) -> KnowledgeBase:
    from babelink.kb.obo import read_obo

    return read_obo(path, languages=languages)


def _tsv(path: Path, languages, *_) -> KnowledgeBase:
    from babelink.kb.tabular import read_tsv

    return read_tsv(path, languages=languages)


def _jsonl(path: Path, languages, *_) -> KnowledgeBase:
    from babelink.kb.tabular import read_jsonl

    return read_jsonl(path, languages=languages)


def _parquet(path: Path, languages, *_) -> KnowledgeBase:
    from babelink.kb.store import load_kb

    kb = load_kb(path)
    return kb if languages is None else kb.select_languages(languages)


#: `--kb-format` → reader of (path, languages, sources, term_types); each imports its module on use.
READERS = {"umls": _umls, "ctd": _ctd, "obo": _obo, "tsv": _tsv, "jsonl": _jsonl, "parquet": _parquet}
