"""Cognate respelling of words a lexicon lacks: link and normalize with it and without, same run.

    python benchmarks/cognates.py [--data ../shared/data] [--no-write]

`Renderer` respells a word that neither its language's lexicon nor the KB's English names know as
the English KB word its lexicon's own cognate pairs teach (`translate.cognates`: "pneumonie" →
"pneumonia"). Two bundles, each run with the respelling off (`RenderParams(cognates=False)`, the
baseline) and on (the default) on one loaded linker, the encoder cache emptied before each run:
the embedded default (lexicons mined from its ICD-10 titles; gold ids matched through each
concept's codes as in `benchmarks/modifiers.py`) and open-umls typed by HPO with the shared MUSE
lexicons (as in `benchmarks/calibrate.py`). `link`: the non-English document sets, language given,
default decision; `normalize` (open-umls): every in-KB query of XL-BEL v0.0, Mantra GSC and QUAERO
dev, language given. No parameter of the rules was chosen on these sets: `MIN_PAIRS` and
`MIN_PRECISION` are fixed by what they mean (three pairs, right more often than wrong).
"""

from __future__ import annotations

import time
from dataclasses import replace
from functools import partial

from calibrate import _documents
from modifiers import code_index, gold_by_codes
from recall_gate import MUSE
from report import arguments, cached_bundle, commit, machine, publish, shared_path

from babelink import augment
from babelink.bundle.store import load_bundle
from babelink.eval import benchmark
from babelink.eval.metrics import span_scores
from babelink.linker import Linker
from babelink.train.context_filter import gold_mentions
from babelink.translate import read_lexicons

LINKED = ("Mantra es", "Mantra fr", "QUAERO dev")
SYSTEMS = {False: "respelling off (baseline)", True: "respelling on (default)"}
#: Changed mentions shown per kind and workload.
EXAMPLES = 6


def _switch(linker: Linker, cognates: bool) -> None:
    renderer = linker.bundle.renderer
    renderer.params = replace(renderer.params, cognates=cognates)


def _link(linker: Linker, documents: list, cognates: bool) -> tuple[float, dict]:
    """Seconds and (document, start, end) → (text, concept, rendering) of every mention kept."""
    _switch(linker, cognates)
    linker.encoder.clear()
    started = time.perf_counter()
    linked = linker.documents.link(documents)
    seconds = time.perf_counter() - started
    return seconds, {(document.id, m.start, m.end): (m.text, m.candidates[0].concept_id, m.candidates[0].translated)
                     for document, found in zip(documents, linked) for m in found.mentions}


def _link_rows(name: str, linker: Linker, gold_of, data, changes: list) -> list[str]:
    """`gold_of(documents)`: (document, start, end) → the KB's ids of each gold mention it holds."""
    rows = []
    for corpus in LINKED:
        workload = f"{name} · {corpus}"
        documents = _documents(data, corpus)
        gold = gold_of(documents)
        runs = {flag: _link(linker, documents, flag) for flag in SYSTEMS}
        for flag, (seconds, found) in runs.items():
            strict = span_scores([(*key, concept) for key, (_, concept, _) in found.items()],
                                 [(*key, ids) for key, ids in gold.items()])["strict"]
            rows.append(f"| {workload} | {len(documents):,} | {SYSTEMS[flag]} | {len(gold):,} | "
                        f"{strict['predicted']:,} | {strict['precision']:.3f} | {strict['recall']:.3f} | "
                        f"**{strict['f1']:.3f}** | {len(documents) / seconds:.2f} |")
            print(rows[-1], flush=True)
        changes.append(_differences(workload, runs[False][1], runs[True][1], gold))
    return rows


def _differences(workload: str, before: dict, after: dict, gold: dict) -> str:
    """How many linked mentions the respelling gained and lost, right or not, and a few of each."""
    kinds: dict[str, list[str]] = {"gained, right": [], "gained, not gold": [], "lost, right": [], "lost, not gold": []}
    concepts = [{key: linked[1] for key, linked in found.items()} for found in (before, after)]
    for key in sorted(set(before) | set(after)):
        if concepts[0].get(key) != concepts[1].get(key):
            for side, found in (("gained", after), ("lost", before)):
                if key in found:
                    text, concept, rendering = found[key]
                    verdict = "right" if concept in gold.get(key, ()) else "not gold"
                    kinds[f"{side}, {verdict}"].append(f"*{text}* → {concept} (via \"{rendering}\")")
    return f"- {workload}: " + "; ".join(
        f"{kind} {len(found)}" + (f" ({', '.join(found[:EXAMPLES])}{', …' if len(found) > EXAMPLES else ''})"
                                   if found else "")
        for kind, found in kinds.items())


def _normalize_rows(linker: Linker, data) -> list[str]:
    kb = linker.bundle.kb
    sets = [(f"XL-BEL {lang}", benchmark.xlbel_set(data, kb, (lang,)).queries) for lang in benchmark.XLBEL_LANGUAGES]
    mantra = benchmark.mantra_set(data, kb).queries
    sets += [(f"Mantra {lang}", [q for q in mantra if q.lang == lang]) for lang in benchmark.MANTRA_LANGUAGES.values()]
    sets.append(("QUAERO dev", benchmark.quaero_set(data, kb, "dev").queries))
    rows = []
    for name, queries in sets:
        cells = []
        for flag in SYSTEMS:
            _switch(linker, flag)
            found = linker.normalize([q.mention for q in queries], lang=queries[0].lang)
            hits = [[c.concept_id in q.gold_ids for c in candidates] for q, candidates in zip(queries, found)]
            cells.append(f"{sum(any(h[:1]) for h in hits) / len(queries):.3f} / "
                         f"{sum(any(h[:5]) for h in hits) / len(queries):.3f}")
        rows.append(f"| {name} | {len(queries):,} | {cells[0]} | {cells[1]} |")
        print(rows[-1], flush=True)
    return rows


def main() -> None:
    args = arguments(__doc__.splitlines()[0])
    started = time.perf_counter()
    default = Linker.open()
    codes = code_index(default.bundle.kb)
    changes: list[str] = []
    link_rows = _link_rows("embedded default", default, partial(gold_by_codes, codes=codes), args.data, changes)
    bundle = replace(load_bundle(cached_bundle(args.data, "open-umls", types="hpo")),
                     lexicon=read_lexicons([args.data / MUSE]))
    umls = Linker(bundle, encoder=bundle.query_encoder())
    resolver = augment.gold_resolver(bundle.kb)
    link_rows += _link_rows("open-umls + MUSE", umls, lambda documents: gold_mentions(documents, resolver),
                            args.data, changes)
    normalize_rows = _normalize_rows(umls, args.data)
    lines = [
        f"## {time.strftime('%Y-%m-%d')} — cognate respelling in renderings (commit `{commit()}`)", "",
        (f"Command: `python benchmarks/cognates.py` · bundles: the embedded default "
         f"({default.bundle.provenance['bundle']}) and open-umls typed by HPO with `{shared_path(args.data / MUSE)}` · "
         f"machine: {machine()}"), "",
        "`link`, language given, strict P/R/F1; each set linked twice on one loaded linker:", "",
        ("| workload | documents | system | gold mentions in KB | mentions | strict P | strict R | strict F1 | "
         "documents/s |"),
        "|---|---:|---|---:|---:|---:|---:|---:|---:|", *link_rows, "",
        "`normalize` on open-umls + MUSE, in-KB queries, language given, Acc@1 / Acc@5:", "",
        f"| set | queries | {SYSTEMS[False]} | {SYSTEMS[True]} |", "|---|---:|---:|---:|", *normalize_rows, "",
        "Linked mentions that differ (offsets or concept), by kind:", "", *changes, "",
        f"Run time {time.perf_counter() - started:.0f} s.", "",
    ]
    publish("\n".join(lines), not args.no_write, "end-to-end")


if __name__ == "__main__":
    main()
