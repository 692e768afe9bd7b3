"""Helpers that tests import (`from support import …`; `tests/` is on pytest's `pythonpath`)."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

#: A four-name UMLS-layout KB in two languages, for tests that build a bundle through the CLI.
MRCONSO = """\
C0027051|ENG|P|L1|PF|S1|Y|A1||||MSH|MH|D009203|Myocardial Infarction|0|N||
C0027051|SPA|P|L3|PF|S3|Y|A3||||MSHSPA|MH|D009203|Infarto de miocardio|0|N||
C0011849|ENG|P|L5|PF|S5|Y|A5||||MSH|MH|D003920|Diabetes Mellitus|0|N||
C0004096|ENG|P|L7|PF|S7|Y|A7||||MSH|MH|D001249|Asthma|0|N||
"""

#: The top of HPO: a root and two of its branches, Phenotypic abnormality and Clinical modifier.
HPO_TOP = """\
[Term]
id: HP:0000001
name: All

[Term]
id: HP:0000118
name: Phenotypic abnormality
is_a: HP:0000001 ! All

[Term]
id: HP:0012823
name: Clinical modifier
is_a: HP:0000001
"""


def kb_of(names: dict[str, list[str]]):
    """A KB of `{concept id: [preferred name, synonyms…]}`."""
    from babelink.kb.base import KnowledgeBaseBuilder

    builder = KnowledgeBaseBuilder()
    for concept_id, concept_names in names.items():
        for position, name in enumerate(concept_names):
            builder.add_name(concept_id, name, preferred=position == 0)
    return builder.build()


def build_sparse_bundle(names: dict[str, list[str]], out: Path) -> Path:
    """A real sparse bundle of `{concept id: [preferred name, synonyms…]}`: builds in a second."""
    from babelink.bundle.store import build_bundle

    return build_bundle(kb_of(names), out, retriever="sparse")


class CountingEncoder:
    """A real encoder that records each batch it is asked to encode (`calls`; `texts`, all of them)."""

    def __init__(self, encoder):
        self.encoder, self.dimension, self.calls = encoder, encoder.dimension, []

    @property
    def texts(self) -> list[str]:
        return [text for call in self.calls for text in call]

    def encode(self, texts):
        self.calls.append(list(texts))
        return self.encoder.encode(texts)

    def describe(self):
        return self.encoder.describe()


def babelink(*args, stdin=None) -> subprocess.CompletedProcess:
    """Run the CLI as users do: a real subprocess, text output, never raising on a non-zero exit."""
    return subprocess.run(
        [sys.executable, "-c", "from babelink.cli import main; main()", *map(str, args)],
        input=stdin, capture_output=True, text=True, timeout=300, check=False,
    )


def benchmark_script(name: str):
    """A script of `benchmarks/` imported as a module (the scripts import each other by bare name)."""
    folder = str(Path(__file__).resolve().parents[1] / "benchmarks")
    sys.path.insert(0, folder)
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(folder)
