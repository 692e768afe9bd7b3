"""A bundle's integrity records: each file's SHA-256 and size in the manifest, checked on load.

A load checks the file list and sizes (cheap: a truncated or swapped file shows in its size);
`babelink verify` recomputes every checksum.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from babelink.errors import BundleError
from babelink.fsutil import sha256_file

MANIFEST = "manifest.json"


def file_records(root: Path, files: Iterable[Path]) -> dict:
    """The manifest's `files` (SHA-256) and `sizes` (bytes) of `files` under `root`."""
    files = sorted(files)
    return {"files": {file.relative_to(root).as_posix(): sha256_file(file) for file in files},
            "sizes": {file.relative_to(root).as_posix(): file.stat().st_size for file in files}}


def check_files(path: Path, files: dict[str, str], sizes: dict[str, int] | None) -> None:
    """Every file under `path` is listed in the manifest and has the size `sizes` records, or
    (`sizes` None) the SHA-256 `files` records."""
    unlisted = sorted(
        file.relative_to(path).as_posix()
        for file in path.rglob("*")
        if file.is_file() and file.name != MANIFEST and file.relative_to(path).as_posix() not in files
    )
    if unlisted:
        raise BundleError(f"{path}: file {unlisted[0]} is not in the manifest; rebuild the bundle")
    for relative, expected in files.items():
        file = path / relative
        if not file.is_file():
            raise BundleError(f"{path}: file {relative} listed in the manifest is missing")
        if sizes is not None and file.stat().st_size != sizes.get(relative):
            raise BundleError(f"{path}: file {relative} is {file.stat().st_size:,} bytes, the manifest says "
                              f"{sizes.get(relative)!r} (truncated or replaced); rebuild the bundle")
        if sizes is None and sha256_file(file) != expected:
            raise BundleError(f"{path}: file {relative} does not match the manifest checksum (modified or truncated)")
