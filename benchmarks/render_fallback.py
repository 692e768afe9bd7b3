"""Mentions their own language's lexicon cannot render, rendered through the other lexicons: embedded default.

    python benchmarks/render_fallback.py [--data ../shared/data] [--no-write]

The embedded default's lexicons are mined from its KB's own translated names (ICD-10 titles in
nine languages): small, and each lacks words a neighbour's has (French "pneumonie" is in the
German titles only). `Renderer.render` renders a mention none of whose words its language's
lexicon knows as one of unknown language, through the lexicons that know most of its characters.
The baseline, same run, renders such a mention not at all (the rule before). Each set is linked
twice with the default decision, its language given; gold ids are matched through each concept's
codes as in `benchmarks/modifiers.py` (gold mentions no concept carries are left out). Reported:
strict P/R/F1 and the linked mentions that differ, with the rendering that found them.
"""

from __future__ import annotations

import argparse
import itertools
import time
from dataclasses import replace
from pathlib import Path

from modifiers import code_index
from report import arguments, commit, machine, publish

from babelink.batching import batched
from babelink.eval.metrics import span_scores
from babelink.formats import read_documents
from babelink.link.linker import Linker
from babelink.translate.render import Renderer

#: set → (paths under bench/, language)
SETS = {
    "Mantra GSC es": (("mantra_gsc/Mantra-GSC/Spanish",), "es"),
    "Mantra GSC fr": (("mantra_gsc/Mantra-GSC/French",), "fr"),
    "QUAERO dev": (("quaero/corpus/dev/EMEA", "quaero/corpus/dev/MEDLINE"), "fr"),
}
BASELINE, DEFAULT = "own language's lexicon only (baseline)", "other lexicons when it renders nothing (default)"


def own_language_only(self: Renderer, normalized: str, lang: str | None = None) -> list[str]:
    """`Renderer.render` without the fallback: a mention of a given language goes through its lexicon alone."""
    per_language = [self._renderings(normalized, code) for code in self.languages(normalized, lang)]
    texts = dict.fromkeys(text for group in itertools.zip_longest(*per_language) for text in group if text)
    texts.pop(normalized, None)
    return list(texts)[: self.params.renderings]


def linked(documents, rule) -> dict[tuple[str, int, int], tuple[str, str, str | None]]:
    """(document, start, end) → (text, concept, rendering) of every mention `link` keeps under `rule`."""
    default = Renderer.render
    Renderer.render = rule
    try:
        linker = Linker.open()
        return {(document.id, m.start, m.end): (m.text, m.candidates[0].concept_id, m.candidates[0].translated)
                for batch in batched(documents, 16) for document in linker.link_documents(batch)
                for m in document.mentions}
    finally:
        Renderer.render = default


def main() -> None:
    args = arguments(__doc__.splitlines()[0], argparse.ArgumentParser(description=__doc__.splitlines()[0]))
    started = time.perf_counter()
    linker = Linker.open()
    codes = code_index(linker.bundle.kb)
    rows, changes = [], []
    for name, (paths, lang) in SETS.items():
        documents = [replace(document, lang=lang) for path in paths
                     for document in read_documents(Path(args.data) / "bench" / path)]
        gold = {(document.id, a.start, a.end): ids for document in documents for a in document.annotations
                for ids in [set().union(*(codes.get(code, set()) for code in a.concept_ids))] if ids}
        gold_rows = [(*key, ids) for key, ids in gold.items()]
        runs = {system: linked(documents, rule) for system, rule in ((BASELINE, own_language_only),
                                                                     (DEFAULT, Renderer.render))}
        for system, found in runs.items():
            strict = span_scores([(*key, concept) for key, (_, concept, _) in found.items()], gold_rows)["strict"]
            rows.append(f"| {name} | {lang} | {system} | {len(gold):,} | {strict['predicted']:,} | "
                        f"{strict['precision']:.3f} | {strict['recall']:.3f} | **{strict['f1']:.3f}** |")
        before, after = runs[BASELINE], runs[DEFAULT]
        for key in sorted(set(before) | set(after)):
            if before.get(key) != after.get(key):
                text, concept, rendering = after.get(key) or before[key]
                verdict = "right" if concept in gold.get(key, ()) else "not gold"
                side = "gained" if key in after else "lost"
                changes.append(f"{name}: {side} *{text}* → {concept} (via \"{rendering}\", {verdict})")
    lines = [
        f"## {time.strftime('%Y-%m-%d')} — renderings through other lexicons, embedded default (commit `{commit()}`)",
        "", (f"Command: `python benchmarks/render_fallback.py` · bundle: the embedded default "
             f"({linker.bundle.provenance['bundle']}) · machine: {machine()}"), "",
        "Strict P/R/F1, each set linked twice in one process, its language given:", "",
        "| set | lang | system | gold mentions in KB | mentions | strict P | strict R | strict F1 |",
        "|---|---|---|---:|---:|---:|---:|---:|", *rows, "",
        "Linked mentions that differ:", "", *(f"- {change}" for change in changes), "",
        f"Run time {time.perf_counter() - started:.0f} s.", "",
    ]
    publish("\n".join(lines), not args.no_write, "end-to-end")


if __name__ == "__main__":
    main()
