"""Bundle: everything `normalize` and `link` need, built once and loaded by every command.

Layout: `manifest.json`, `kb/` (Parquet tables), `names/` (searchable strings), `sparse/`
(TF-IDF vocabulary, IDF and name matrix) and, for dense and hybrid retrievers, `dense/` (FAISS
index over the name strings' vectors); optionally `spans/` (the same over labeled training
spans), `translations/` (bilingual lexicons and the KB's English words) and `dft_documents.txt`
(the documents dictionary fine-tuning consumed). The encoder is referenced, not copied: the
manifest holds its name, settings and fingerprint. The manifest records versions, build
parameters, counts and each file's SHA-256 and size; loading checks the sizes and that no file is
missing or unlisted (cheap), `verify` the checksums, so a bundle edited or truncated after the
build is an error rather than a silent wrong answer. The bundle is written to a temporary
directory beside the target and renamed into place.
"""

from __future__ import annotations

import glob
import hashlib
import json
import shutil
import sys
import time
import uuid
import zipfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from functools import cached_property
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from babelink.augment import DftRecord
from babelink.bundle.integrity import MANIFEST, check_files, file_records
from babelink.encoders import DEFAULT, Encoder, encoder_from_manifest, manifest_entry, open_encoder
from babelink.encoders.cache import CachedEncoder
from babelink.encoders.vector_store import VectorStore, store_directory
from babelink.errors import BabelinkError, BundleError
from babelink.fsutil import replace_directory, staging_directory
from babelink.index.approximate import ApproximateNames
from babelink.index.dense import (
    DenseNameIndex,
    DenseParams,
    NameVectors,
    StoredNameVectors,
    embed_strings,
    read_params,
)
from babelink.index.lazy import LazyNameIndex, write_lazy_index
from babelink.index.names import NameTable
from babelink.index.sparse import TfidfNameIndex, TfidfParams
from babelink.kb.base import KnowledgeBase
from babelink.kb.store import load_kb, save_kb
from babelink.retrieve.calibration import script_shares
from babelink.retrieve.generators import HybridParams
from babelink.text import NAME_NORMALIZATION, normalize_name
from babelink.translate import (
    ENGLISH_WORDS_FILE,
    Lexicon,
    Renderer,
    english_words,
    load_english_words,
    save_english_words,
)

#: 3: traditional Han folded to simplified; 4: name strings flag KB spellings that are short capitals only.
FORMAT_VERSION = 4
RETRIEVERS = ("sparse", "dense", "hybrid")
DFT_DOCUMENTS = "dft_documents.txt"
TRANSLATIONS = "translations"
#: Fused score a labeled span must reach (besides the KB's best) to be used before the KB; tuned on
#: dev data (BENCHMARKS.md), where 0.85–0.97 lie within 0.001 mean Acc@1 of each other.
DEFAULT_SWITCH_THRESHOLD = 0.85
_LIBRARIES = ("babelink", "numpy", "scipy", "scikit-learn", "pyarrow")
_ENCODER_LIBRARIES = ("torch", "transformers")
_DENSE_LIBRARIES = ("faiss-cpu", *_ENCODER_LIBRARIES)


@dataclass
class Bundle:
    path: Path
    manifest: dict
    kb: KnowledgeBase
    names: NameTable
    sparse: TfidfNameIndex
    dense: NameVectors | None = None  # a FAISS index, or a lazy one (`index.lazy`)
    spans: Bundle | None = None  # the labeled-span index (002 §6.2), same retriever and encoder
    lexicon: Lexicon | None = None  # bilingual lexicons queries are also searched through (`retrieve.translation`)

    @property
    def retriever(self) -> str:
        return self.manifest["retriever"]

    @property
    def encoder_name(self) -> str | None:
        """What its names were encoded with: `default` (the bundled e5), a packaged trained
        encoder's name or a checkpoint directory; None for a sparse bundle."""
        return self.manifest.get("dense", {}).get("encoder", {}).get("name")

    @cached_property
    def languages(self) -> frozenset[str]:
        """The languages the bundle reads: those of its names (and its labeled spans') and of its
        translation lexicons."""
        named = {lang for part in (self, self.spans) if part is not None for lang in part.kb.languages() if lang}
        return frozenset(named) | frozenset(self.lexicon.languages if self.lexicon is not None else ())

    @cached_property
    def renderer(self) -> Renderer | None:
        """The English renderer of the lexicons (None without), shared by every generator over the bundle."""
        if self.lexicon is None:
            return None
        stored = f"{TRANSLATIONS}/{ENGLISH_WORDS_FILE}" in self.manifest["files"]  # not in bundles built before
        words = load_english_words(self.path / TRANSLATIONS) if stored else english_words(self.kb)
        return Renderer(self.lexicon, words)

    @cached_property
    def scripts(self) -> dict[str, float]:
        """Share of the name strings in each script (`calibration.script_shares`), as the build
        recorded it (computed for bundles built before it did: 0.2 s of every load)."""
        return self.manifest["kb"].get("scripts") or script_shares(self.names.strings)

    @cached_property
    def provenance(self) -> dict:
        """What every prediction says about where it came from: a short id of this build (from
        the manifest's hash), the KB's name and version as the build recorded them (`+N-updates`
        after `babelink update`), and the babelink version answering."""
        digest = hashlib.sha256(json.dumps(self.manifest, sort_keys=True).encode()).hexdigest()
        kb = kb_identity(self.manifest["kb"])
        if updates := len(self.manifest.get("updates", ())):  # the release the build read, and what was added
            kb["version"] += f"+{updates}-update{'s' if updates > 1 else ''}"
        return {"bundle": digest[:12], "kb": kb, "babelink": installed_version("babelink")}

    def encoder(self, runtime: str = "torch") -> Encoder:
        """The encoder the dense index was built with, run by `runtime` (`encoders.RUNTIMES`);
        loaded on each call: keep the result."""
        if self.dense is None:
            raise BundleError(f"{self.path}: a {self.retriever} bundle has no dense index or encoder")
        encoder = self._checked(encoder_from_manifest(self.manifest["dense"]["encoder"], self.path, runtime))
        self.dense.attach(encoder)
        return encoder

    def query_encoder(self, encoder: Encoder | None = None, runtime: str = "torch") -> CachedEncoder:
        """What queries are encoded by: `encoder` (default `self.encoder(runtime)`) behind a vector
        cache that gives a query written as one of the bundle's names (or labeled spans) the vector
        stored for it, without an encoder pass. An encoder already cached is used as it is, so
        linkers that share one share its cache."""
        if isinstance(encoder, CachedEncoder):
            return encoder
        encoder = encoder or self.encoder(runtime)
        self.dense.attach(encoder)
        stored = [StoredNameVectors(bundle.names, bundle.dense) for bundle in (self, self.spans)
                  if bundle is not None and bundle.dense is not None and bundle.dense.stores_vectors]
        return CachedEncoder(encoder, stored=stored)

    def _checked(self, encoder: Encoder) -> Encoder:
        if encoder.dimension != self.dense.dimension:
            raise BundleError(f"{self.path}: the encoder gives {encoder.dimension}-d vectors, "
                              f"the index holds {self.dense.dimension}-d")
        return encoder

    def dft_documents(self) -> list[str]:
        """Ids of the training documents whose mentions dictionary fine-tuning added to the KB
        (000 §4.5): a contextual filter must be trained on the other documents."""
        if "dft" not in self.manifest:
            return []
        return (self.path / DFT_DOCUMENTS).read_text(encoding="utf-8").splitlines()


def installed_version(distribution: str) -> str | None:
    """Its installed version; None for a checkout run without installing (the GPU job's machine)."""
    try:
        return version(distribution)
    except PackageNotFoundError:
        return None


def kb_identity(kb: dict) -> dict:
    """`{"name", "version"}` of a manifest's KB: as given at build (`--kb-name`, `--kb-version`; the
    embedded default's pinned sources), else the KB file's name and a content hash."""
    source = kb.get("source") or {}
    name = source.get("name") or Path(source.get("path") or "unnamed").name
    return {"name": name, "version": source.get("version") or f"content-{str(kb.get('hash', ''))[:12]}"}


def build_bundle(
    kb: KnowledgeBase,
    out: str | Path,
    *,
    retriever: str = "hybrid",
    encoder: str | Path = DEFAULT,
    encoder_settings: dict | None = None,
    sparse_params: TfidfParams | None = None,
    dense_params: DenseParams | None = None,
    hybrid_params: HybridParams | None = None,
    spans: KnowledgeBase | None = None,
    switch_threshold: float = DEFAULT_SWITCH_THRESHOLD,
    dft: DftRecord | None = None,
    translations: Lexicon | None = None,
    kb_source: dict | None = None,
    link_thresholds: dict[str, float] | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> Path:
    """Index `kb` and write the bundle directory `out` atomically; return its path.

    `retriever` `sparse` needs no encoder; `dense` and `hybrid` encode every name string with
    `encoder` (`default` or a checkpoint directory; `encoder_settings` override its
    `EncoderSettings`). `spans` (see `augment.span_kb`) adds a
    labeled-span index searched first; `dft` records the documents dictionary fine-tuning took
    names from. `translations` (`translate.read_lexicons`) are stored for searching mentions through
    their English renderings too. `link_thresholds` (`LINK_THRESHOLDS`) are what
    `link` uses on this bundle unless told otherwise: an encoder other than the bundled one scores on
    its own cosine scale. `progress(stage, done, total)` follows the encoding of names.
    """
    out = Path(out).absolute()
    if retriever not in RETRIEVERS:
        raise BabelinkError(f"retriever must be one of {', '.join(RETRIEVERS)}, got {retriever!r}")
    if out.exists() and not (out / MANIFEST).is_file():
        raise BundleError(f"{out}: exists and is not a babelink bundle; refusing to replace it")
    if len(kb) == 0:
        raise BabelinkError("the knowledge base has no concepts (check the --lang / source filters)")
    link_thresholds = _checked_thresholds(link_thresholds or {})
    sparse_params = sparse_params or TfidfParams()
    dense_params = dense_params or DenseParams()
    if dense_params.kind == "lazy" and retriever != "hybrid":
        raise BabelinkError(f"a lazy index ranks the TF-IDF shortlist: it needs the hybrid retriever, not {retriever}")
    dense_encoder = (
        open_encoder(encoder, **(encoder_settings or {})) if retriever != "sparse" else None
    )  # fail fast, before any work
    started = time.perf_counter()
    staging = staging_directory(out)
    try:
        files, names = _write_indexes(kb, staging, sparse_params, dense_encoder, dense_params, progress)
        manifest = {
            "format_version": FORMAT_VERSION,
            "build_id": uuid.uuid4().hex,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "kb": {"source": kb_source or {}, "concepts": len(kb), "names": kb.num_names, "strings": len(names),
                   "languages": kb.languages(), "hash": kb.content_hash(), "scripts": script_shares(names.strings)},
            "retriever": retriever,
            "sparse": asdict(sparse_params),
            "name_normalization": NAME_NORMALIZATION,
        }
        libraries = _LIBRARIES
        if dense_encoder is not None:
            manifest["dense"] = {"index": asdict(dense_params), "encoder": manifest_entry(encoder, dense_encoder)}
            libraries += _DENSE_LIBRARIES if dense_params.kind != "lazy" else _ENCODER_LIBRARIES
        if retriever == "hybrid":
            manifest["hybrid"] = asdict(hybrid_params or HybridParams())
        if spans is not None:
            # training spans number thousands, not millions: an exact index whatever the KB's
            spans_files, spans_names = _write_indexes(spans, staging / "spans", sparse_params, dense_encoder,
                                                      DenseParams(kind="flat"), None)
            files += spans_files
            manifest["spans"] = {"concepts": len(spans), "names": spans.num_names, "strings": len(spans_names),
                                 "switch_threshold": switch_threshold}
        if link_thresholds:
            manifest["link"] = link_thresholds
        if translations is not None:
            files += [*translations.save(staging / TRANSLATIONS), save_english_words(kb, staging / TRANSLATIONS)]
            manifest["translations"] = translations.summary()
        if dft is not None:
            (staging / DFT_DOCUMENTS).write_text("".join(f"{doc_id}\n" for doc_id in dft.documents), encoding="utf-8")
            files.append(staging / DFT_DOCUMENTS)
            manifest["dft"] = dft.summary()
        manifest["versions"] = {library: installed_version(library) for library in libraries}
        manifest["build_seconds"] = round(time.perf_counter() - started, 2)
        manifest.update(file_records(staging, files))
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=2, ensure_ascii=False))
        replace_directory(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return out


#: The `link.documents.LinkParams` a bundle may record (`build --link-threshold`, `--recall-threshold`):
#: the link threshold is on its encoder's cosine scale, so a bundle of another encoder links at the
#: thresholds chosen on dev for it; the TF-IDF gate may go down with it.
LINK_THRESHOLDS = ("recall_threshold", "link_threshold")


def _checked_thresholds(thresholds: dict[str, float]) -> dict[str, float]:
    for name, value in thresholds.items():
        if name not in LINK_THRESHOLDS:
            raise BabelinkError(f"link_thresholds: {name!r} is not one a bundle records "
                                f"({', '.join(LINK_THRESHOLDS)})")
        if not 0.0 <= value <= 1.0:
            raise BabelinkError(f"link_thresholds: {name} must be between 0 and 1, got {value}")
    return dict(thresholds)


def _write_indexes(kb, directory: Path, sparse_params, encoder, dense_params, progress) -> tuple[list[Path], NameTable]:
    """KB tables, name strings, TF-IDF and (with an encoder) FAISS index under `directory`."""
    directory.mkdir(exist_ok=True)
    files = save_kb(kb, directory / "kb")
    names = NameTable.from_kb(kb)
    if len(names) == 0:
        raise BabelinkError("no name in the knowledge base has a letter or digit: nothing to index")
    for part in ("names", "sparse"):
        (directory / part).mkdir()
    files += names.save(directory / "names")
    files += TfidfNameIndex.fit(names.strings, sparse_params).save(directory / "sparse")
    if encoder is not None:
        (directory / "dense").mkdir()
        if dense_params.kind == "lazy":  # names are encoded on first need (`index.lazy`)
            return files + write_lazy_index(dense_params, encoder, names.strings, directory / "dense", progress), names
        DenseNameIndex.layout(dense_params, len(names), encoder.dimension)
        tick = (lambda done: progress("encoding names", done, len(names))) if progress else None
        vectors = embed_strings(encoder.encode, names.strings, progress=tick)
        files += DenseNameIndex.build(vectors, dense_params).save(directory / "dense")
    return files, names


def read_manifest(path: str | Path) -> dict:
    path = Path(path)
    if path.is_file():
        raise BundleError(f"{path}: a file, not a bundle directory (a KB file is read by `babelink build --kb`)")
    if not path.is_dir():
        raise BundleError(f"{path}: no such bundle directory (build one with `babelink build`)")
    try:
        manifest = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BundleError(f"{path}: not a babelink bundle (no {MANIFEST})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise BundleError(f"{path / MANIFEST}: unreadable manifest ({error})") from None
    if not isinstance(manifest, dict) or manifest.get("format_version") != FORMAT_VERSION:
        found = manifest.get("format_version") if isinstance(manifest, dict) else None
        raise BundleError(f"{path}: bundle format {found!r}, this babelink reads format {FORMAT_VERSION}; rebuild it")
    for field, kind in (("files", dict), ("kb", dict), ("build_id", str)):
        if not isinstance(manifest.get(field), kind):
            raise BundleError(f"{path / MANIFEST}: field {field!r} is missing or malformed; rebuild the bundle")
    return manifest


def load_bundle(path: str | Path, *, verify: bool = False) -> Bundle:
    """Load a bundle whose files are those the manifest lists, each of the size it records, with
    the counts it records; with `verify` (`babelink verify`), every file's SHA-256 too. The build
    computed the checksums; recomputing them on every load made start-up slow, while a truncated
    or replaced file shows in its size and the counts. A bundle built before sizes were recorded
    is checked by its checksums.

    A bundle rebuilt in place while it loads (`build_bundle` onto its path swaps in a new
    directory) could mix the files of two builds. A load therefore counts only when the manifest's
    `build_id` is the same before and after every file was read; otherwise it starts over."""
    path = Path(path)
    for _ in range(_LOAD_ATTEMPTS):
        before = _build_id(path)
        try:
            bundle = _load_once(path, verify)
        except BundleError:
            if before == _build_id(path) and not (before is None and _being_swapped(path)):
                raise  # missing, or stable and damaged: not a bundle being replaced
        else:
            if bundle.manifest["build_id"] == _build_id(path):  # no swap since the manifest was read
                return bundle
        time.sleep(_RELOAD_PAUSE_SECONDS)
    raise BundleError(f"{path}: rebuilt {_LOAD_ATTEMPTS} times while loading it; load it when the build is done")


def load_bundle_with_encoder(path: str | Path, runtime: str = "torch") -> tuple[Bundle, Encoder | None]:
    """`load_bundle(path)` and, for a dense or hybrid bundle, its `encoder(runtime)`, loaded side by
    side: the model loads mostly outside the GIL while the indexes are read (the ONNX runtime's
    tokenizer, which holds the GIL, is parsed on first use; notes.md, start-up)."""
    path = Path(path)
    entry = read_manifest(path).get("dense", {}).get("encoder")
    if entry is None:
        return load_bundle(path), None
    with ThreadPoolExecutor(max_workers=1) as pool:
        pending = pool.submit(encoder_from_manifest, entry, path, runtime)
        bundle = load_bundle(path)
        encoder = pending.result()
    if bundle.dense is None or bundle.manifest["dense"]["encoder"] != entry:  # rebuilt in between
        return bundle, bundle.encoder(runtime) if bundle.dense is not None else None
    return bundle, bundle._checked(encoder)


#: A load that overlapped an in-place rebuild is retried this often, this far apart.
_LOAD_ATTEMPTS = 5
_RELOAD_PAUSE_SECONDS = 0.05


def _being_swapped(path: Path) -> bool:
    """Whether a rebuild is swapping a new directory in (`fsutil.replace_directory`): between its
    two renames the path is briefly missing while the old directory sits aside."""
    return any(path.parent.glob(f"{glob.escape(f'.{path.name}.old-')}*"))


def _build_id(path: Path) -> str | None:
    try:
        return json.loads((path / MANIFEST).read_text(encoding="utf-8")).get("build_id")
    except (OSError, ValueError, AttributeError):
        return None


def _load_once(path: Path, verify: bool) -> Bundle:
    manifest = read_manifest(path)
    try:
        check_files(path, manifest["files"], manifest.get("sizes") if not verify else None)
    except OSError as error:  # a file gone or unreadable between listing and reading it
        raise BundleError(f"{path}: cannot read {error.filename or 'a file'}: {error.strerror}") from None
    bundle = _load_indexes(path, manifest, manifest["kb"])
    if "spans" in manifest:
        bundle.spans = _load_indexes(path / "spans", manifest, manifest["spans"])
    if "translations" in manifest:
        try:
            bundle.lexicon = Lexicon.load(path / TRANSLATIONS, manifest["translations"]["sources"])
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise BundleError(f"{path}: cannot load the translation lexicons: {error}") from None
    return bundle


def _load_indexes(path: Path, manifest: dict, counts: dict) -> Bundle:
    """The KB and indexes under `path`, checked against the manifest's `counts`."""
    def loaded(part: str, load):
        try:
            return load(path / part)
        except (OSError, ValueError, KeyError, zipfile.BadZipFile, BabelinkError) as error:
            raise BundleError(f"{path / part}: cannot load this part of the bundle: {error}") from None

    kb, names, sparse = loaded("kb", load_kb), loaded("names", NameTable.load), loaded("sparse", TfidfNameIndex.load)
    _warn_if_normalized_otherwise(path, manifest.get("name_normalization", _UNRECORDED_NORMALIZATION), names)
    dense = loaded("dense", lambda _: _load_dense(path, manifest["dense"]["encoder"], names)) \
        if "dense" in manifest else None
    found = {"concepts": len(kb), "names": kb.num_names, "strings": len(names)}
    for field, count in found.items():
        if counts.get(field) != count:
            raise BundleError(f"{path}: manifest says {counts.get(field)} {field}, the bundle holds {count}")
    if sparse.matrix.shape[0] != len(names):
        raise BundleError(f"{path}: sparse index has {sparse.matrix.shape[0]} rows for {len(names)} name strings")
    if dense is not None and len(dense) != len(names):
        raise BundleError(f"{path}: dense index has {len(dense)} vectors for {len(names)} name strings")
    return Bundle(path, manifest, kb, names, sparse, dense)


#: The `NAME_NORMALIZATION` of a bundle built before bundles recorded theirs.
_UNRECORDED_NORMALIZATION = 1


def _warn_if_normalized_otherwise(path: Path, built: object, names: NameTable) -> None:
    """A bundle whose names another revision of `normalize_name` normalised may hold strings that
    no mention, normalised now, equals: it still loads (a rebuild of a large KB takes a while, and
    most KBs hold no such name), and says how many there are, rather than miss them silently."""
    if built == NAME_NORMALIZATION:
        return
    changed = [surface for string, surface in zip(names.strings, names.surfaces) if normalize_name(surface) != string]
    if changed:
        print(f"babelink: {path}: {len(changed):,} of {len(names):,} name strings normalise otherwise in this "
              f"babelink (name normalisation {built} at the build, {NAME_NORMALIZATION} now; e.g. {changed[0]!r}), "
              "so mentions cannot meet them exactly; rebuild the bundle to refresh them", file=sys.stderr)


def _load_dense(path: Path, entry: dict, names: NameTable) -> NameVectors:
    params = read_params(path / "dense")
    if params.kind != "lazy":
        return DenseNameIndex.load(path / "dense")
    store = VectorStore(store_directory(entry), int(entry["dimension"]))
    return LazyNameIndex(params, names.strings, entry, store, lambda: encoder_from_manifest(entry, path),
                         ApproximateNames.load(path / "dense"))
