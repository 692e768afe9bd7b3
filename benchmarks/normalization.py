"""Normalization benchmark: exact match, sparse, dense, hybrid and index switching on four sets.

    python benchmarks/normalization.py [--data ../shared/data] [--no-write] [--kb ctd-medic] [--encoder NAME|DIR]

Builds (or reuses, see `report.cached_bundle`) one default hybrid bundle per KB (open-umls;
CTD MEDIC), and one with a lazy index for the `lazy index` systems (each set starts from an empty
vector store: the runner deletes the bundled encoder's store in the babelink home), then scores
each system on XL-BEL v0.0 (visible languages, in-KB), Mantra GSC (in-KB), QUAERO dev (in-KB;
a dev split, used in tuning), NCBI-disease test and BC5CDR-Disease test. `hybrid + translations`
attaches the shared MUSE lexicons to the open-umls bundle, which is what `build --translations`
stores beside the same indexes. The labeled-span index of `hybrid + spans`
holds the mentions of the corpus's own train split. Every build and every system runs in its
own process, so peak RSS is that step's alone. `--encoder` builds the bundles with a trained
encoder instead of the bundled one: a packaged artefact's name (`e5-sap`) or a checkpoint
directory (e.g. `babelink train sap` output); the hybrid, with and without translations, and the
lazy systems then run over the bundled encoder's bundles too, the same run's baseline. Appends a section per KB
to benchmarks/log/normalization.md (and regenerates BENCHMARKS.md) unless --no-write.
"""

from __future__ import annotations

import argparse
import multiprocessing
import resource
import shlex
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from report import KB_FILES, arguments, cached_bundle, commit, emptied_store, machine, publish

from babelink import augment
from babelink.bundle.store import DEFAULT_SWITCH_THRESHOLD, build_bundle, load_bundle
from babelink.eval import benchmark
from babelink.index.dense import DenseParams
from babelink.index.sparse import TfidfNameIndex, TfidfParams
from babelink.kb.store import load_kb
from babelink.linker import Linker, generator_for
from babelink.retrieve.generators import (
    DenseGenerator,
    ExactMatchGenerator,
    HybridGenerator,
    HybridParams,
    SparseGenerator,
)
from babelink.retrieve.switching import SwitchingGenerator
from babelink.retrieve.translation import TranslatingGenerator
from babelink.translate import Renderer, english_words, read_lexicons
from babelink.translate.mining import mine_lexicon

SETS = {"open-umls": ("xlbel", "mantra", "quaero"), "ctd-medic": ("ncbi", "bc5cdr")}
#: Translation lexicons of `hybrid + translations` (under the shared data), and the sets it runs on.
LEXICONS = "translations/muse"
TRANSLATED_SETS = ("xlbel", "mantra", "quaero")
TRAIN_FILES = {"ncbi": "ncbi_disease/NCBItrainset_corpus.txt", "bc5cdr": "bc5cdr/CDR_TrainingSet.PubTator.txt"}
SYSTEMS = {
    "exact match": "dictionary baseline: normalised string equality",
    "sparse": "char_wb 2–4-gram TF-IDF, shortlist + exact rescoring (issue 2's default)",
    "sparse exhaustive": "same vectors, cosine against every name (the shortlist's reference)",
    "char-3-gram exhaustive": "reference point of the issue: plain char 3-gram TF-IDF, exact cosine",
    "dense": (
        "the bundle's encoder alone (zero-shot multilingual-e5-small unless --encoder names another), "
        "HNSW inner-product search (the default index)"
    ),
    "hybrid": "babelink default: sparse and dense cosines fused (weights from dev data)",
    "hybrid + translations": "hybrid, each mention also searched through its English renderings by the MUSE "
    "lexicons (`build --translations ../shared/data/translations/muse`), language guessed; open-umls sets only",
    "hybrid + KB-mined translations": "hybrid, each mention also searched through its English renderings by a "
    "lexicon mined from the KB's own names (`build --translations-from-kb`, what the embedded default does), "
    "language guessed; open-umls sets only",
    "hybrid, lazy index": "the hybrid over a bundle built with `--index lazy`: no name encoded at build (each KB "
    "token is, for the approximate name vectors the query searches), the TF-IDF shortlist and the approximate hits "
    "ranked by the encoder, candidate names encoded on first need into an empty store; mentions/s of that first "
    "pass (the second pass, names stored, follows the tables)",
    "hybrid + KB-mined translations, lazy index": "the same through the KB-mined lexicon: what the embedded default "
    "does with a lazy index",
    "hybrid + spans": "hybrid behind index switching, labeled-span index from the corpus's train split",
    "hybrid + spans + abbreviations": "the same, short forms defined in the mention's document searched as their "
    "long form",
}
#: With `--encoder`, these systems also run over the bundled encoder's bundle with the library's
#: parameters, named with `BUNDLED`: the trained encoder's same-run baseline (issue 40); the lazy
#: ones are what the embedded default would do with either encoder.
BASELINE_SYSTEMS = ("hybrid", "hybrid + translations", "hybrid, lazy index",
                    "hybrid + KB-mined translations, lazy index")
BUNDLED = ", bundled encoder"
CHAR3 = TfidfParams(analyzer="char", ngram_min=3, ngram_max=3, sublinear_tf=False, exhaustive=True)


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def build_step(data: str, kb_name: str, encoder: str) -> dict:
    """Build the default bundle (unless this code version built it before) and time a KB load."""
    started = time.perf_counter()
    path = cached_bundle(Path(data), kb_name, **({} if encoder == "default" else {"encoder": encoder}))
    built_now = time.perf_counter() - started > 5
    manifest = load_bundle(path).manifest
    started = time.perf_counter()
    load_kb(path / "kb")
    return {
        "path": str(path),
        "build_s": manifest["build_seconds"],
        "built_now": built_now,
        "kb_load_s": time.perf_counter() - started,
        "rss_mb": _peak_rss_mb(),
        "names": manifest["kb"]["names"],
        "strings": manifest["kb"]["strings"],
        "concepts": manifest["kb"]["concepts"],
    }


def _generator(bundle, system: str, data: Path, set_name: str, scratch: str, tuned: dict, encoder=None):
    if system == "exact match":
        return ExactMatchGenerator(bundle.kb, bundle.names)
    if system == "sparse":
        return SparseGenerator(bundle.kb, bundle.names, bundle.sparse)
    if system == "sparse exhaustive":
        index = TfidfNameIndex(
            replace(bundle.sparse.params, exhaustive=True), bundle.sparse.vectorizer, bundle.sparse.matrix
        )
        return SparseGenerator(bundle.kb, bundle.names, index)
    if system == "char-3-gram exhaustive":
        return SparseGenerator(bundle.kb, bundle.names, TfidfNameIndex.fit(bundle.names.strings, CHAR3))
    if system == "dense":
        return DenseGenerator(bundle.kb, bundle.names, bundle.dense, bundle.query_encoder())  # as `--retriever dense`
    system = system.removesuffix(", lazy index")
    encoder = encoder or bundle.query_encoder()
    kb_generator = HybridGenerator(bundle.kb, bundle.names, bundle.sparse, bundle.dense, encoder,
                                   HybridParams(dense_weight=tuned["dense_weight"]))
    if system == "hybrid":
        return kb_generator
    if "translations" in system:
        lexicon = mine_lexicon(bundle.kb) if "KB-mined" in system else read_lexicons([data / LEXICONS])
        return TranslatingGenerator(kb_generator, Renderer(lexicon, english_words(bundle.kb)), bundle.names)
    documents = augment.read_annotated(data / "bench" / TRAIN_FILES[set_name])
    spans = augment.span_kb(documents, bundle.kb)
    spans_bundle = load_bundle(build_bundle(spans, Path(scratch) / set_name, retriever="hybrid",
                                            encoder=bundle.manifest["dense"]["encoder"]["name"]))
    return SwitchingGenerator(generator_for(spans_bundle, encoder), kb_generator, tuned["switch_threshold"])


QUERY_SETS = {"xlbel": benchmark.xlbel_set, "mantra": benchmark.mantra_set, "ncbi": benchmark.ncbi_set,
              "bc5cdr": benchmark.bc5cdr_set, "quaero": benchmark.quaero_set}


def _lazy_bundle_path(data: str, kb_name: str, encoder: str) -> Path:
    """The KB's bundle with a lazy index."""
    return cached_bundle(Path(data), kb_name, dense_params=DenseParams(kind="lazy"),
                         **({} if encoder == "default" else {"encoder": encoder}))


def system_step(bundle_path: str, system: str, data: str, set_names: tuple[str, ...], tuned: dict,
                kb_name: str = "", encoder: str = "default") -> dict:
    lazy = system.endswith(", lazy index")
    path = _lazy_bundle_path(data, kb_name, encoder) if lazy else bundle_path
    started = time.perf_counter()
    bundle = load_bundle(path)
    load_seconds = time.perf_counter() - started
    results = {}
    for set_name in set_names:
        if system.startswith("hybrid + spans") and set_name not in TRAIN_FILES:
            continue
        if "translations" in system and set_name not in TRANSLATED_SETS:
            continue
        if lazy:
            bundle = emptied_store(bundle)
        query_set = QUERY_SETS[set_name](Path(data), bundle.kb)
        with tempfile.TemporaryDirectory() as scratch:
            query_encoder = bundle.query_encoder() if lazy else None  # cleared before the second pass
            linker = Linker(bundle, _generator(bundle, system, Path(data), set_name, scratch, tuned, query_encoder))
            linker.normalize(["warm-up"])  # model loading and first-call costs are not per-mention costs
            def normalize(mentions, linker=linker):
                return [[c.concept_id for c in cs] for cs in linker.normalize(mentions, top_k=5)]
            results[query_set.name] = benchmark.run_normalization(
                normalize, query_set, resolve_abbreviations=system.endswith("abbreviations"))
            if lazy:  # again, the names stored, the mentions encoded anew
                query_encoder.clear()
                again = benchmark.run_normalization(normalize, query_set)
                results[query_set.name]["stored_names"] = len(bundle.dense.store)
                results[query_set.name]["warm_mentions_per_second"] = again["mentions_per_second"]
                results[query_set.name]["same_as_first_pass"] = again["overall"] == results[query_set.name]["overall"]
    return {"results": results, "load_s": load_seconds, "rss_mb": _peak_rss_mb()}


def _in_child(function, *args):
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(function, args)


def kb_command(argv: list[str], kb_name: str) -> str:
    """The command that measures `kb_name` alone as this run did (each KB's systems run in their
    own processes, so one KB's section is what `--kb` that KB gives): its section's command."""
    rest, skip = [], False
    for argument in argv:
        if skip or argument == "--kb" or argument.startswith("--kb="):
            skip = argument == "--kb"
            continue
        rest.append(argument)
    return shlex.join(["python", "benchmarks/normalization.py", "--kb", kb_name, *rest])


def report(kb_name: str, build: dict, runs: dict, command: str) -> str:
    """The section of one KB: its bundle build, each system on each of its sets (`runs`: system ->
    `system_step` result), lazy passes and per-language tables."""
    rss = f"{build['rss_mb']:.0f}" + ("" if build["built_now"] else " (load only; built earlier by this code)")
    lines = [f"## {time.strftime('%Y-%m-%d')} — normalization (commit `{commit()}`)", "",
             f"Command: `{command}` · machine: {machine()}", "",
             "Default bundle build (read KB + normalise + fit TF-IDF + encode names + FAISS HNSW index + write):", "",
             "| KB | concepts | names | name strings | build s | KB store load s | peak RSS MB of the step |",
             "|---|---:|---:|---:|---:|---:|---:|",
             (f"| {kb_name} | {build['concepts']:,} | {build['names']:,} | {build['strings']:,} | "
              f"{build['build_s']:.0f} | {build['kb_load_s']:.2f} | {rss} |")]
    lines += [
        "",
        "Systems: " + "; ".join(f"**{name}**: {what}" for name, what in SYSTEMS.items() if name in runs) + "."
        + (f" **…{BUNDLED}**: the same system over the bundled encoder's bundle with the library's parameters, "
           "the trained encoder's baseline in the same run." if any(name.endswith(BUNDLED) for name in runs) else ""),
        "",
        (
            "| set | KB | in-KB queries / read | system | Acc@1 | Acc@5 | MAP | mentions/s | × sparse speed "
            "| peak RSS MB |"
        ),
        "|---|---|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    per_language = []
    for set_name in runs["sparse"]["results"]:
        reference_speed = runs["sparse"]["results"][set_name]["mentions_per_second"]
        for system, run in runs.items():
            if set_name not in run["results"]:
                continue
            r = run["results"][set_name]
            o = r["overall"]
            lines.append(
                f"| {set_name} | {kb_name} | {o['count']:,} / {r['read']:,} | {system} | {o['acc@1']:.3f} | "
                f"{o['acc@5']:.3f} | {o['map']:.3f} | {r['mentions_per_second']:,.0f} | "
                f"{r['mentions_per_second'] / reference_speed:.1f} | {run['rss_mb']:.0f} |"
            )
            if r.get("groups"):
                cells = " | ".join(f"{g['acc@1']:.3f} / {g['acc@5']:.3f}" for g in r["groups"].values())
                macro = sum(g["acc@1"] for g in r["groups"].values()) / len(r["groups"])
                per_language.append((set_name, system, list(r["groups"]), cells, macro))
    lazy_rows = [(set_name, system, r) for system, run in runs.items() for set_name, r in run["results"].items()
                 if "warm_mentions_per_second" in r]
    if lazy_rows:
        lines += ["", ("Lazy index, the first pass (empty store) and a second one (names stored, mentions "
                       "encoded anew):"), "",
                  "| set | KB | system | names stored | mentions/s, first pass | second pass | same answers |",
                  "|---|---|---|---:|---:|---:|---|"]
        lines += [f"| {set_name} | {kb_name} | {system} | {r['stored_names']:,} | {r['mentions_per_second']:,.0f} | "
                  f"{r['warm_mentions_per_second']:,.0f} | {'yes' if r['same_as_first_pass'] else 'no'} |"
                  for set_name, system, r in lazy_rows]
    for set_name in dict.fromkeys(row[0] for row in per_language):
        rows = [row for row in per_language if row[0] == set_name]
        languages = rows[0][2]
        lines += [
            "",
            f"{set_name}, Acc@1 / Acc@5 per language (n = in-KB queries) and the unweighted mean of Acc@1:",
            "",
            "| system | " + " | ".join(languages) + " | mean Acc@1 |",
            "|---|" + "---:|" * (len(languages) + 1),
        ]
        lines += [f"| {system} | {cells} | {macro:.3f} |" for _, system, _, cells, macro in rows]
    return "\n".join(lines) + "\n"


def _bundled_baseline(data: str, kb_name: str, systems: list[str]) -> dict:
    """`BASELINE_SYSTEMS` among `systems` run over the bundled encoder's bundle, the library's
    parameters (not those tuned for `--encoder`): each named with `BUNDLED`."""
    bundle = _in_child(build_step, data, kb_name, "default")["path"]
    library = {"dense_weight": HybridParams().dense_weight, "switch_threshold": DEFAULT_SWITCH_THRESHOLD}
    translated = set(SETS[kb_name]) & set(TRANSLATED_SETS)
    runs = {}
    for system in (s for s in BASELINE_SYSTEMS if s in systems and (translated or "translations" not in s)):
        runs[system + BUNDLED] = _in_child(system_step, bundle, system, data, SETS[kb_name], library, kb_name)
        print(f"ran {kb_name} / {system}{BUNDLED}", file=sys.stderr)
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kb", choices=list(KB_FILES), action="append", help="only these KBs (default: both)")
    parser.add_argument("--encoder", default="default",
                        help="encoder of the bundles: a packaged trained encoder's name or a checkpoint directory "
                             "(default: the bundled one)")
    parser.add_argument("--dense-weight", type=float, default=HybridParams().dense_weight,
                        help="hybrid fusion weight (default: the library's; another one tuned on dev for --encoder)")
    parser.add_argument("--switch-threshold", type=float, default=DEFAULT_SWITCH_THRESHOLD,
                        help="index-switch threshold (default: the library's; another one tuned on dev for --encoder)")
    parser.add_argument("--systems", nargs="+", choices=list(SYSTEMS), metavar="SYSTEM",
                        help="only these systems, quoted, and sparse, the speed reference (default: all)")
    args = arguments(parser.description, parser)
    tuned = {"dense_weight": args.dense_weight, "switch_threshold": args.switch_threshold}
    if not (args.data / "READY").is_file():
        sys.exit(f"benchmark data not found at {args.data}")
    for kb_name in dict.fromkeys(args.kb or KB_FILES):  # a section per KB, published as soon as it is measured
        build = _in_child(build_step, str(args.data), kb_name, args.encoder)
        print(f"built {kb_name}: {build}", file=sys.stderr)
        runs = {}
        for system in dict.fromkeys(["sparse", *args.systems]) if args.systems else SYSTEMS:
            runs[system] = _in_child(system_step, build["path"], system, str(args.data), SETS[kb_name], tuned,
                                     kb_name, args.encoder)
            print(f"ran {kb_name} / {system}", file=sys.stderr)
        if args.encoder != "default":
            runs.update(_bundled_baseline(str(args.data), kb_name, list(runs)))
        publish(report(kb_name, build, runs, kb_command(sys.argv[1:], kb_name)), not args.no_write, "normalization")


if __name__ == "__main__":
    main()
