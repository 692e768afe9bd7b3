"""Changing a built bundle without rebuilding it: adding concepts and synonyms (`update_bundle`),
giving it another dense index (`reindex_bundle`), translation lexicons (`add_translations`) or its
own calibrator (`store_calibrator`).

A rebuild re-encodes every name (minutes for a UMLS-size KB, hours on a CPU for full UMLS); an
update encodes only the new name strings. Name strings are numbered in order of first
appearance, so the merged KB's existing strings keep their rows and the new ones come after:
the dense index gets the new vectors appended, the TF-IDF matrix the new rows. The TF-IDF's
IDF weights stay those of the build; an n-gram no earlier name had joins its vocabulary
(`TfidfNameIndex.extended`). When more than `REFIT_UNSEEN_SHARE` of the new names' n-grams are unseen
(a new script, a new vocabulary: weights the build's names no longer describe), the TF-IDF is refitted
on every string instead, seconds even for a large KB, since it needs no encoder. The manifest
records the share and what was done. The updated bundle is written beside its target and swapped
in, like a build.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import pyarrow as pa

from babelink.bundle.integrity import MANIFEST, file_records
from babelink.bundle.store import TRANSLATIONS, Bundle, load_bundle, read_manifest
from babelink.encoders.vector_store import VectorStore, encode_through, store_directory
from babelink.errors import BundleError, InputFormatError
from babelink.fsutil import replace_directory, staging_directory, write_directory
from babelink.index.approximate import ApproximateNames
from babelink.index.dense import DenseNameIndex, DenseParams, embed_strings, save_params
from babelink.index.lazy import write_lazy_index
from babelink.index.names import NameTable
from babelink.index.sparse import TfidfNameIndex
from babelink.kb.base import KnowledgeBase
from babelink.kb.obo import read_obo_branches, types_from_ontology
from babelink.kb.readers import infer_format, read_kb
from babelink.kb.store import save_kb
from babelink.retrieve.calibration import CALIBRATION_FILE, Calibrator, script_shares
from babelink.text import NAME_NORMALIZATION
from babelink.translate import Lexicon, save_english_words

#: What makes two names one: a concept's name in a language (its source and term type aside).
_NAME_KEY = ("concept_id", "name", "lang")
#: Share of the new names' n-grams missing from the TF-IDF vocabulary above which it is refitted.
REFIT_UNSEEN_SHARE = 0.02


def read_additions(bundle: str | Path, path: str | Path, kb_format: str | None = None
                   ) -> tuple[KnowledgeBase, list[str]]:
    """The KB file at `path` read as the bundle's build read its KB: its names in the build's
    `--lang` languages only, a UMLS file through the build's `--source` and `--term-type`, its
    concepts typed by the build's `--types-from` ontologies. Returns the KB and a note for each
    ontology no longer where the build read it (its types are not added)."""
    built = read_manifest(bundle)["kb"].get("source") or {}
    umls = (kb_format or infer_format(Path(path))) == "umls"
    additions = read_kb(path, kb_format, sources=built.get("sources") if umls else None,
                        term_types=built.get("term_types") if umls else None)
    if languages := frozenset(built.get("languages") or ()):
        additions = additions.select_languages(languages)
        if len(additions) == 0:
            raise InputFormatError(path, None, f"no name in the bundle's languages ({', '.join(sorted(languages))}), "
                                               "those its build kept")
    notes = []
    for ontology in map(Path, built.get("types_from") or ()):
        if ontology.is_file():
            additions, _ = types_from_ontology(additions, read_obo_branches(ontology))
        else:
            notes.append(f"{ontology}: the build typed its concepts with this ontology, which is gone; "
                         "the added concepts have none of its types")
    return additions, notes


def merge_kb(kb: KnowledgeBase, additions: KnowledgeBase) -> tuple[KnowledgeBase, int]:
    """`kb` with the names of `additions` appended after its own, the concepts it lacks, and the
    types, xrefs and alternative ids `additions` gives concepts it has; and how many of its
    concepts gained some. A name given under an id `kb` knows as another concept's alternative (a
    source joined into it) goes to that concept; a name a concept has already in that language is
    not added again, so updating twice with one file adds nothing the second time."""
    ids = [kb.resolve(concept_id) or concept_id for concept_id in additions.names.column("concept_id").to_pylist()]
    names = additions.names.set_column(additions.names.schema.get_field_index("concept_id"), "concept_id",
                                       pa.array(ids, pa.string()))
    seen = set(zip(*(kb.names.column(field).to_pylist() for field in _NAME_KEY)))
    fresh = []
    for key in zip(*(names.column(field).to_pylist() for field in _NAME_KEY)):
        fresh.append(key not in seen)
        seen.add(key)
    known = [kb.resolve(concept_id) for concept_id in additions.concepts.column("concept_id").to_pylist()]
    new = pa.array([target is None for target in known], pa.bool_())
    concepts, enriched = _with_metadata(kb, additions, known)
    return KnowledgeBase(pa.concat_tables([kb.names, names.filter(pa.array(fresh, pa.bool_()))]),
                         pa.concat_tables([concepts, additions.concepts.filter(new)])), enriched


_METADATA = ("types", "xrefs", "alt_ids")


def _with_metadata(kb: KnowledgeBase, additions: KnowledgeBase, known: list[str | None]) -> tuple[pa.Table, int]:
    """`kb.concepts` with the metadata `additions` gives the concepts `known` (an addition's row →
    the `kb` concept it is, or None), and how many concepts gained some; an alternative id another
    concept has already is left out."""
    if all(target is None for target in known):
        return kb.concepts, 0
    row_of = {concept_id: row for row, concept_id in enumerate(kb.concepts.column("concept_id").to_pylist())}
    columns = {field: None for field in _METADATA}  # read only when a known concept gains something
    enriched: set[str] = set()
    for target, given in zip(known, additions.concepts.select(list(_METADATA)).to_pylist()):
        if target is None:
            continue
        for field in _METADATA:
            values = [value for value in given[field] if field != "alt_ids" or kb.resolve(value) is None]
            if columns[field] is None and values:
                columns[field] = kb.concepts.column(field).to_pylist()
            if values:
                current = columns[field][row_of[target]] = columns[field][row_of[target]] or []  # null: none yet
                gained = [value for value in dict.fromkeys(values) if value not in current]
                current.extend(gained)
                if gained:
                    enriched.add(target)
    concepts = kb.concepts
    for field, values in columns.items():
        if values is not None:
            concepts = concepts.set_column(concepts.schema.get_field_index(field), field,
                                           pa.array(values, concepts.schema.field(field).type))
    return concepts, len(enriched)


def update_bundle(path: str | Path, additions: KnowledgeBase, out: str | Path | None = None, *,
                  source: str = "") -> Path:
    """Write `path` with `additions` (`out`: elsewhere; None: in place) and return where. When the
    bundle has every name already, it is left byte for byte as it was (`out`: an exact copy).

    Uses the bundle's own encoder, which must still match the fingerprint the build recorded;
    labeled spans and lexicons are kept as they are. `source` names the additions in the
    manifest's `updates`."""
    bundle = load_bundle(path, verify=True)
    out = _checked_target(bundle, out)
    merged, enriched = merge_kb(bundle.kb, additions)
    if merged.num_names == bundle.kb.num_names and merged.concepts.equals(bundle.kb.concepts):  # nothing changes
        if out != bundle.path.absolute():
            write_directory(out, lambda staging: shutil.copytree(bundle.path, staging, dirs_exist_ok=True))
        return out
    names = NameTable.from_kb(merged)
    before = len(bundle.names)
    if names.strings[:before] != bundle.names.strings:
        raise BundleError(f"{bundle.path}: its name strings are not a prefix of the updated KB's; rebuild it")
    added = names.strings[before:]
    # Vectors to add: a FAISS index's new rows, a lazy one's approximate rows (both refusing a changed
    # checkpoint); a lazy index encodes the names themselves on first need. No new string (codes
    # added, or a name another concept has): no vector, and no encoder loaded.
    lazy = bundle.dense is not None and bundle.dense.params.kind == "lazy"
    approximate = bundle.dense.approximate if lazy else None
    vectors_added = bool(added) and bundle.dense is not None and (not lazy or approximate is not None)
    encoder = bundle.encoder() if vectors_added else None
    staging = staging_directory(out)
    try:
        shutil.copytree(bundle.path, staging, dirs_exist_ok=True)
        rewritten = ("kb", "names", "sparse", *(("dense",) if encoder is not None else ()))
        for part in rewritten:  # no file of the old layout stays beside the new files
            shutil.rmtree(staging / part, ignore_errors=True)
            (staging / part).mkdir()
        save_kb(merged, staging / "kb")
        names.save(staging / "names")
        unseen = _unseen_share(bundle.sparse, added)
        refit = unseen > REFIT_UNSEEN_SHARE
        sparse = TfidfNameIndex.fit(names.strings, bundle.sparse.params) if refit else bundle.sparse.extended(added)
        sparse.save(staging / "sparse")
        if bundle.lexicon is not None:  # the renderer keeps the English words of the KB as they are
            save_english_words(merged, staging / TRANSLATIONS)
        if encoder is not None and approximate is not None:
            save_params(bundle.dense.params, staging / "dense")
            grown = ApproximateNames.load(bundle.path / "dense", writable=True)
            grown.add(encoder, added)
            grown.save(staging / "dense")
        elif encoder is not None:
            dense = DenseNameIndex.load(bundle.path / "dense", writable=True)
            dense.add(embed_strings(encoder.encode, added))
            dense.save(staging / "dense")
        _write_manifest(staging, bundle, merged, names, {
            "at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "source": source, "given": additions.num_names,
            "names": merged.num_names - bundle.kb.num_names,
            "new_concepts": len(merged) - len(bundle.kb), "new_strings": len(added),
            "enriched_concepts": enriched,
            "unseen_ngram_share": round(unseen, 4), "sparse": "refitted" if refit else "appended"})
        replace_directory(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return out


def _unseen_share(index: TfidfNameIndex, strings: list[str]) -> float:
    """Share of the new strings' n-grams (occurrences) that the build's vocabulary lacks."""
    grams = [gram for string in strings for gram in index.vectorizer.analyze(string)]
    return sum(gram not in index.vectorizer.columns for gram in grams) / len(grams) if grams else 0.0


def _write_manifest(staging: Path, bundle: Bundle, kb: KnowledgeBase, names: NameTable, update: dict) -> None:
    manifest = dict(bundle.manifest)
    manifest["build_id"] = uuid.uuid4().hex
    # "hash" stays the release's the build read: the provenance names it, and "+N-updates" what was added
    manifest["kb"] = {**manifest["kb"], "concepts": len(kb), "names": kb.num_names, "strings": len(names),
                      "languages": kb.languages(), "scripts": script_shares(names.strings)}
    manifest["updates"] = [*manifest.get("updates", []), update]
    manifest["name_normalization"] = NAME_NORMALIZATION  # every string was normalised again, as before
    manifest.update(file_records(staging, (file for file in staging.rglob("*")
                                            if file.is_file() and file.name != MANIFEST)))
    (staging / MANIFEST).write_text(json.dumps(manifest, indent=2, ensure_ascii=False))



def reindex_bundle(path: str | Path, params: DenseParams, out: str | Path | None = None,
                   progress: Callable[[str, int, int], None] | None = None) -> Path:
    """Give the bundle at `path` a dense index of `params.kind`: a bundle built with a lazy index
    for a quick start (`index.lazy`) gets the dense search of a FAISS index, without a rebuild and
    without encoding again the names its lazy index encoded (they are in the encoder's vector
    store, which keeps the others too). Only `dense/` and the manifest change; the other files are
    hard-linked, and the result is swapped in like an update (`out`: written there instead)."""
    bundle = load_bundle(path, verify=True)
    out = _checked_target(bundle, out)
    if bundle.dense is None:
        raise BundleError(f"{bundle.path}: a {bundle.retriever} bundle has no encoder to index its names with; "
                          "rebuild it with --retriever hybrid")
    if params.kind == "lazy" and bundle.retriever != "hybrid":
        raise BundleError(f"{bundle.path}: a lazy index ranks the TF-IDF shortlist: it needs the hybrid retriever, "
                          f"not {bundle.retriever}")
    encoder = bundle.encoder()  # refuses a changed checkpoint
    entry = bundle.manifest["dense"]["encoder"]
    store = VectorStore(store_directory(entry), encoder.dimension)

    def write(staging: Path) -> None:
        shutil.copytree(bundle.path, staging, copy_function=os.link, dirs_exist_ok=True)
        (staging / MANIFEST).unlink()  # unlinked before rewriting, or the old bundle's files would change
        shutil.rmtree(staging / "dense")
        (staging / "dense").mkdir()
        if params.kind == "lazy":
            files = write_lazy_index(params, encoder, bundle.names.strings, staging / "dense", progress)
        else:
            tick = (lambda done: progress("encoding names", done, len(bundle.names))) if progress else None
            vectors = embed_strings(lambda texts: encode_through(store, encoder.encode, texts),
                                    bundle.names.strings, progress=tick)
            store.save()
            files = DenseNameIndex.build(vectors, params).save(staging / "dense")
        manifest = {**bundle.manifest, "build_id": uuid.uuid4().hex,
                    "dense": {**bundle.manifest["dense"], "index": asdict(params)},
                    "reindexed": [*bundle.manifest.get("reindexed", []), {
                        "at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "from": bundle.dense.params.kind,
                        "to": params.kind}]}
        _write_with_files(staging, manifest, files, replaced="dense/")

    write_directory(out, write)
    return out


def store_calibrator(path: str | Path, calibrator: Calibrator) -> Path:
    """Write `path` with `calibrator` as its own (`calibration.json`, listed in the manifest with
    what it was trained on), swapped in like an update. The other files are hard-linked into the
    new directory, not copied: bundles never change a file in place."""
    bundle = load_bundle(path)

    def write(staging: Path) -> None:
        shutil.copytree(bundle.path, staging, copy_function=os.link, dirs_exist_ok=True)
        for linked in (CALIBRATION_FILE, MANIFEST):  # rewritten: unlinked first, or the old bundle's would change
            (staging / linked).unlink(missing_ok=True)
        calibrator.save(staging / CALIBRATION_FILE)
        manifest = {**bundle.manifest, "build_id": uuid.uuid4().hex, "calibration": calibrator.trained_on}
        _write_with_files(staging, manifest, [staging / CALIBRATION_FILE], replaced=CALIBRATION_FILE)

    write_directory(bundle.path.absolute(), write)
    return bundle.path.absolute()


def add_translations(path: str | Path, lexicon: Lexicon, out: str | Path | None = None) -> Path:
    """Write `path` with `lexicon` among its translation lexicons (`out`: elsewhere; None: in place)
    and return where: the new files' senses lead and the bundle's own fill their gaps, the order of
    `build --translations` beside `--translations-from-kb`. Only `translations/` and the manifest
    change; the other files are hard-linked, and the result is swapped in like an update. A
    bundle that has every file of `lexicon` already is left as it was (`out`: an exact copy)."""
    bundle = load_bundle(path)
    out = _checked_target(bundle, out)
    had = {(source.lang, source.sha256) for source in bundle.lexicon.sources} if bundle.lexicon else set()
    new = [source for source in lexicon.sources if (source.lang, source.sha256) not in had]
    if not new:
        if out != bundle.path.absolute():
            write_directory(out, lambda staging: shutil.copytree(bundle.path, staging, dirs_exist_ok=True))
        return out
    combined = lexicon if bundle.lexicon is None else lexicon.followed_by(bundle.lexicon)

    def write(staging: Path) -> None:
        shutil.copytree(bundle.path, staging, copy_function=os.link, dirs_exist_ok=True)
        (staging / MANIFEST).unlink()  # rewritten: unlinked first, or the old bundle's would change
        shutil.rmtree(staging / TRANSLATIONS, ignore_errors=True)
        files = [*combined.save(staging / TRANSLATIONS), save_english_words(bundle.kb, staging / TRANSLATIONS)]
        manifest = {**bundle.manifest, "build_id": uuid.uuid4().hex, "translations": combined.summary(),
                    "translations_added": [*bundle.manifest.get("translations_added", []), {
                        "at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "files": [source.file for source in new]}]}
        _write_with_files(staging, manifest, files, replaced=TRANSLATIONS + "/")

    write_directory(out, write)
    return out


def _checked_target(bundle: Bundle, out: str | Path | None) -> Path:
    """Where a change of `bundle` is written: `out`, else the bundle itself; never over a
    directory that is not a bundle."""
    target = Path(out or bundle.path).absolute()
    if target != bundle.path.absolute() and target.exists() and not (target / MANIFEST).is_file():
        raise BundleError(f"{target}: exists and is not a babelink bundle; refusing to replace it")
    return target


def _write_with_files(staging: Path, manifest: dict, files: list[Path], replaced: str) -> None:
    """Write `manifest` into `staging` with `files` recorded in place of its entries under
    `replaced` (a directory ending in "/", or a file name)."""
    records = file_records(staging, files)
    for field in records:
        if field in manifest:  # a bundle built before sizes were recorded has none to extend
            kept = {name: value for name, value in manifest[field].items()
                    if not (name.startswith(replaced) if replaced.endswith("/") else name == replaced)}
            manifest[field] = {**kept, **records[field]}
    (staging / MANIFEST).write_text(json.dumps(manifest, indent=2, ensure_ascii=False))
