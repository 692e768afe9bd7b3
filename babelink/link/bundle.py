"""LinkerBundle: everything `normalize` and `link` need, built once and loaded by every command.

Layout: `manifest.json`, `kb/` (Parquet tables), `names/` (searchable strings), `sparse/`
(TF-IDF vocabulary, IDF and name matrix). The manifest records versions, build parameters,
counts and a SHA-256 per file; loading checks them, so a bundle edited or truncated after the
build is an error rather than a silent wrong answer. The bundle is written to a temporary
directory beside the target and renamed into place.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass
from importlib.metadata import version
from pathlib import Path

from babelink.errors import BabelinkError, BundleError
from babelink.index.names import NameTable
from babelink.index.sparse import TfidfNameIndex, TfidfParams
from babelink.kb.base import KnowledgeBase
from babelink.kb.store import load_kb, save_kb

FORMAT_VERSION = 1
MANIFEST = "manifest.json"
_LIBRARIES = ("babelink", "numpy", "scipy", "scikit-learn", "pyarrow")


@dataclass
class Bundle:
    path: Path
    manifest: dict
    kb: KnowledgeBase
    names: NameTable
    sparse: TfidfNameIndex


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        while chunk := stream.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def build_bundle(
    kb: KnowledgeBase,
    out: str | Path,
    *,
    sparse_params: TfidfParams | None = None,
    kb_source: dict | None = None,
    overwrite: bool = True,
) -> Path:
    """Index `kb` and write the bundle directory `out` atomically; return its path."""
    out = Path(out).absolute()
    if out.exists() and not overwrite:
        raise BundleError(f"{out}: already exists")
    if out.exists() and not (out / MANIFEST).is_file():
        raise BundleError(f"{out}: exists and is not a babelink bundle; refusing to replace it")
    if len(kb) == 0:
        raise BabelinkError("the knowledge base has no concepts (check the --lang / source filters)")
    sparse_params = sparse_params or TfidfParams()
    started = time.perf_counter()
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        files = save_kb(kb, staging / "kb")
        names = NameTable.from_kb(kb)
        (staging / "names").mkdir()
        files += names.save(staging / "names")
        (staging / "sparse").mkdir()
        files += TfidfNameIndex.fit(names.strings, sparse_params).save(staging / "sparse")
        manifest = {
            "format_version": FORMAT_VERSION,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "versions": {library: version(library) for library in _LIBRARIES},
            "kb": {"source": kb_source or {}, "concepts": len(kb), "names": kb.num_names, "strings": len(names),
                   "languages": kb.languages(), "hash": kb.content_hash()},
            "retriever": "sparse",
            "sparse": asdict(sparse_params),
            "build_seconds": round(time.perf_counter() - started, 2),
            "files": {str(path.relative_to(staging)): _sha256(path) for path in files},
        }
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=2, ensure_ascii=False))
        _replace_directory(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return out


def _replace_directory(staging: Path, out: Path) -> None:
    """Rename `staging` to `out`; an existing bundle is moved aside first and removed after."""
    os.chmod(staging, 0o755)
    if not out.exists():
        try:
            staging.rename(out)
            return
        except OSError:
            if not out.exists():
                raise
    retired = out.with_name(f".{out.name}.old-{os.getpid()}")
    out.rename(retired)
    staging.rename(out)
    shutil.rmtree(retired, ignore_errors=True)


def read_manifest(path: str | Path) -> dict:
    path = Path(path)
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
    return manifest


def load_bundle(path: str | Path, *, verify: bool = True) -> Bundle:
    """Load a bundle; with `verify`, every file's SHA-256 and the counts must match the manifest."""
    path = Path(path)
    manifest = read_manifest(path)
    files = manifest.get("files", {})
    for relative, expected in files.items():
        file = path / relative
        if not file.is_file():
            raise BundleError(f"{path}: file {relative} listed in the manifest is missing")
        if verify and _sha256(file) != expected:
            raise BundleError(f"{path}: file {relative} does not match the manifest checksum (modified or truncated)")
    try:
        kb = load_kb(path / "kb")
        names = NameTable.load(path / "names")
        sparse = TfidfNameIndex.load(path / "sparse")
    except (OSError, ValueError, KeyError, BabelinkError) as error:
        raise BundleError(f"{path}: cannot load bundle: {error}") from None
    counts = {"concepts": len(kb), "names": kb.num_names, "strings": len(names)}
    for field, count in counts.items():
        if manifest["kb"].get(field) != count:
            raise BundleError(f"{path}: manifest says {manifest['kb'].get(field)} {field}, the bundle holds {count}")
    if sparse.matrix.shape[0] != len(names):
        raise BundleError(f"{path}: sparse index has {sparse.matrix.shape[0]} rows for {len(names)} name strings")
    return Bundle(path, manifest, kb, names, sparse)
