"""End-to-end linking benchmark: detected spans + concepts against gold, strict and partial P/R/F1.

    python benchmarks/end_to_end.py [--data ../shared/data] [--no-write]
        [--sets ncbi bc5cdr mantra-en …] [--dft-ratios 0.2 …] [--filter-sets ncbi …] [--filter-minutes 20]
        [--filter-layers 6]        [--ner ncbi=DIR bc5cdr=DIR] [--lazy] [--encoder NAME …] [--tune]

Systems, all on span enumeration (k = 4 words, KB-protected stop words, 000 §4.2):
- **sparse baseline**: the char n-gram TF-IDF matcher alone, no labeled spans, no filter (the
  issue's baseline); its link threshold is chosen on dev like the others'.
- **hybrid + spans**: the default linker: TF-IDF high-recall matcher, hybrid ranking behind the
  labeled-span index built from R% of the training documents (DFT split, 000 §4.5).
- **hybrid + spans + filter**: the same with the contextual filter (000 §4.4) trained on the other
  (1 − R) of the training documents, its keep-threshold tuned on dev.
- **ner + hybrid + spans** (`--ner CORPUS=DIR`): the learned detector (002 §4.2) trained on the
  corpus's train split (`babelink train ner`) instead of span enumeration; its spans are ranked
  by the same generator, with every training document in the labeled-span index (R = 100%: no
  filter needs the rest), and a span below the link threshold (tuned on dev) is replaced by its
  linked n-grams (002 §4.4.1). Its detection-only span scores are reported too.
- **hybrid + spans, lazy index** (`--lazy`): the default linker over a bundle built with
  `--index lazy` (no name encoded at build; the embedded default's), its thresholds tuned on dev
  on their own. Its names are encoded into the vector store while dev is tuned, so its docs/s is
  that of a warm store.
- **hybrid + spans, encoder NAME** (`--encoder NAME`, repeatable): the default linker over bundles
  built with another encoder (a packaged trained one such as `e5-sap`, or a checkpoint directory),
  its thresholds tuned on dev on their own: a trained encoder beside the bundled one, same run.

Thresholds (recall, link, overlap policy) are chosen on the dev split only (`--tune` prints the
grid); Mantra GSC has no training split and is linked with the open-umls bundle and the
defaults. NCBI-disease and BC5CDR use CTD MEDIC; BC5CDR gold is its Disease mentions. Gold
mentions whose ids are not in the KB are dropped (in-KB gold); every system runs in its own
process so that documents/s and peak RSS are its own.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import resource
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

from report import arguments, cached_bundle, commit, machine, portable, publish

from babelink import augment
from babelink.batching import batched
from babelink.bundle.store import DEFAULT_SWITCH_THRESHOLD, build_bundle, load_bundle
from babelink.detect import MentionDetector
from babelink.detect.ner import NerDetector
from babelink.detect.overlaps import OVERLAP_POLICIES, resolve_overlaps
from babelink.encoders import checkpoint_path
from babelink.encoders.transformer import require_checkpoint
from babelink.errors import BabelinkError
from babelink.eval.linking import in_kb_gold
from babelink.eval.metrics import span_scores
from babelink.formats import read_documents
from babelink.formats.document import Document
from babelink.home import babelink_home
from babelink.index.dense import DenseParams
from babelink.link.context_filter import ContextFilter
from babelink.link.documents import LinkParams
from babelink.linker import Linker
from babelink.retrieve.generators import SparseGenerator
from babelink.train import context_filter as filter_training
from babelink.train.ner import evaluate_ner

RECALL_GRID = (0.4, 0.5, 0.6, 0.7)
LINK_GRID = (0.80, 0.85, 0.88, 0.90, 0.92, 0.94, 0.96, 0.98, 0.99, 0.995)
SPARSE_LINK_GRID = (0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95)
NER_LINK_GRID = (0.0, 0.8, 0.85, 0.9, 0.92, 0.94, 0.96, 0.98)
NER_SYSTEM = "ner + hybrid + spans"
LAZY_SYSTEM = "hybrid + spans, lazy index"
ENCODER_SYSTEM = "hybrid + spans, encoder "  # + the encoder's name
BATCH = 16


@dataclass(frozen=True)
class Corpus:
    name: str
    kb: str
    test: tuple[str, ...]
    train: str | None = None
    dev: str | None = None
    types: tuple[str, ...] | None = None
    lang: str | None = None


CORPORA = {
    "ncbi": Corpus(
        "NCBI-disease",
        "ctd-medic",
        ("ncbi_disease/NCBItestset_corpus.txt",),
        "ncbi_disease/NCBItrainset_corpus.txt",
        "ncbi_disease/NCBIdevelopset_corpus.txt",
        lang="en",
    ),
    "bc5cdr": Corpus(
        "BC5CDR-Disease",
        "ctd-medic",
        ("bc5cdr/CDR_TestSet.PubTator.txt",),
        "bc5cdr/CDR_TrainingSet.PubTator.txt",
        "bc5cdr/CDR_DevelopmentSet.PubTator.txt",
        ("Disease",),
        "en",
    ),
    **{
        f"mantra-{lang}": Corpus(f"Mantra GSC {lang}", "open-umls", (f"mantra_gsc/Mantra-GSC/{folder}",), lang=lang)
        for folder, lang in (("English", "en"), ("Spanish", "es"), ("French", "fr"))
    },
}


def documents(data: Path, corpus: Corpus, split: str) -> list[Document]:
    """The split's documents, annotations restricted to the corpus's entity types."""
    paths = corpus.test if split == "test" else (getattr(corpus, split),)
    found = []
    for path in paths:
        for document in read_documents(data / "bench" / path):
            kept = tuple(a for a in document.annotations if corpus.types is None or a.type in corpus.types)
            found.append(replace(document, annotations=kept, lang=document.lang or corpus.lang))
    return found


def gold(docs: list[Document], kb) -> list[tuple]:
    resolved = in_kb_gold(docs, augment.gold_resolver(kb))
    return [(doc_id, start, end, ids) for (doc_id, start, end), ids in resolved.items()]


def with_spans(bundle, train_docs: list[Document], scratch: Path):
    """`bundle` behind a labeled-span index of `train_docs` (built here: seconds)."""
    spans = augment.span_kb(train_docs, bundle.kb)
    spans_bundle = load_bundle(build_bundle(spans, scratch / "spans", retriever=bundle.retriever,
                                            encoder=bundle.manifest["dense"]["encoder"]["name"]))
    manifest = {
        **bundle.manifest,
        "spans": {**spans_bundle.manifest["kb"], "switch_threshold": DEFAULT_SWITCH_THRESHOLD},
    }
    return replace(bundle, spans=spans_bundle, manifest=manifest)


def split_train(data: Path, corpus: Corpus, ratio: float) -> tuple[list[Document], list[Document]]:
    return augment.dft_split(documents(data, corpus, "train"), ratio, seed=0)


def make_linker(data: Path, corpus: Corpus, system: str, ratio: float, params: LinkParams, scratch: Path,
                filter_dir: str | None = None, detector: MentionDetector | None = None) -> Linker:
    bundle = load_bundle(cached_bundle(data, corpus.kb, **bundle_options(system)))
    if system == "sparse baseline":
        return Linker(bundle, SparseGenerator(bundle.kb, bundle.names, bundle.sparse), link_params=params)
    if corpus.train is not None and ratio > 0:
        bundle = with_spans(bundle, split_train(data, corpus, ratio)[0], scratch)
    return Linker(bundle, link_params=params, context_filter=ContextFilter(filter_dir) if filter_dir else None,
                  detector=detector)


def bundle_options(system: str) -> dict:
    """How the bundles of `system` are built, beyond the defaults."""
    if system == LAZY_SYSTEM:
        return {"dense_params": DenseParams(kind="lazy")}
    if system.startswith(ENCODER_SYSTEM):
        return {"encoder": system.removeprefix(ENCODER_SYSTEM)}
    return {}


class MemoDetector:
    """A detector whose spans are computed once per text: the tuning grid links dev many times."""

    def __init__(self, detector: MentionDetector):
        self.detector, self.name, self.spans = detector, detector.name, {}

    def detect(self, texts):
        missing = [text for text in dict.fromkeys(texts) if text not in self.spans]
        self.spans.update(zip(missing, self.detector.detect(missing) if missing else []))
        return [self.spans[text] for text in texts]


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def tune_step(data: str, corpus_key: str, system: str, ratio: float) -> dict:
    """Dev F1 of every (recall, link, overlap) triple, from one permissive pass."""
    corpus = CORPORA[corpus_key]
    sparse = system == "sparse baseline"
    permissive = LinkParams(
        recall_threshold=min(RECALL_GRID), link_threshold=min(SPARSE_LINK_GRID if sparse else LINK_GRID)
    )
    with tempfile.TemporaryDirectory() as scratch:
        linker = make_linker(Path(data), corpus, system, ratio, permissive, Path(scratch))
        dev = documents(Path(data), corpus, "dev")
        proposals = filter_training.propose(linker.documents, dev)
        gold_items = gold(dev, linker.bundle.kb)
    grid = {}
    for recall in ([min(RECALL_GRID)] if sparse else RECALL_GRID):
        for link in SPARSE_LINK_GRID if sparse else LINK_GRID:
            for overlap in OVERLAP_POLICIES:
                predicted = [
                    (d.id, p.start, p.end, p.candidates[0].concept_id)
                    for d, found in zip(dev, proposals)
                    for p in resolve_overlaps(
                        [p for p in found if p.candidates[0].score >= link  # the linker's decision (`_links`)
                         and (p.recall_score is None or p.recall_score >= recall)],
                        overlap,
                    )
                ]
                grid[f"{recall}|{link}|{overlap}"] = span_scores(predicted, gold_items)["strict"]["f1"]
    return grid


def ner_tune_step(data: str, corpus_key: str, ner_dir: str, params: dict) -> dict:
    """Dev F1 of the learned detector's system at every link threshold (below it, n-gram search);
    the other `params` are the run's."""
    corpus = CORPORA[corpus_key]
    dev = documents(Path(data), corpus, "dev")
    grid = {}
    with tempfile.TemporaryDirectory() as scratch:
        linker = make_linker(Path(data), corpus, NER_SYSTEM, 1.0, LinkParams(**params), Path(scratch),
                             detector=MemoDetector(NerDetector(ner_dir)))
        gold_items = gold(dev, linker.bundle.kb)
        for link in NER_LINK_GRID:
            tuned = linker.with_options(link_params=replace(linker.link_params, link_threshold=link))
            grid[f"{link}"] = span_scores(predictions(tuned, dev), gold_items)["strict"]["f1"]
    return grid


def filter_step(data: str, corpus_key: str, ratio: float, params: dict, minutes: float, layers: int | None) -> str:
    """Train (or reuse) the filter on the training documents the span index did not take, and
    tune its threshold on dev; returns its directory."""
    corpus = CORPORA[corpus_key]
    key = hashlib.sha256(json.dumps([commit().removesuffix("+dirty"), corpus_key, ratio, params, minutes, layers]
                                    ).encode()).hexdigest()[:12]
    out = babelink_home() / "benchmark-filters" / f"{corpus_key}-{key}"
    if (out / "babelink_filter.json").is_file():
        return str(out)
    with tempfile.TemporaryDirectory() as scratch:
        linker = make_linker(Path(data), corpus, "hybrid + spans", ratio, LinkParams(**params), Path(scratch))
        rest = split_train(Path(data), corpus, ratio)[1]  # the span index took the others
        config = filter_training.FilterTrainingConfig(max_minutes=minutes, epochs=1, layers=layers)
        fitted = filter_training.fit_filter(linker, rest, out, config, dev=documents(Path(data), corpus, "dev"))
        print(f"{corpus_key}: filter on {fitted.documents} documents, {fitted.proposals} proposals, "
              f"{fitted.relevant} relevant, {fitted.trained_on} trained on; threshold "
              f"{fitted.context_filter.settings.threshold} (dev strict F1 {fitted.dev_f1:.4f})", file=sys.stderr)
    return str(out)


def run_step(data: str, corpus_key: str, system: str, ratio: float, params: dict, filter_dir: str | None,
             ner_dir: str | None = None) -> dict:
    corpus = CORPORA[corpus_key]
    with tempfile.TemporaryDirectory() as scratch:
        detector = MemoDetector(NerDetector(ner_dir)) if ner_dir else None  # evaluate_ner reuses its spans
        linker = make_linker(
            Path(data), corpus, system, ratio, LinkParams(**params), Path(scratch), filter_dir, detector
        )
        test = documents(Path(data), corpus, "test")
        linker.link("warm-up text with asthma")
        started = time.perf_counter()
        predicted = predictions(linker, test)
        seconds = time.perf_counter() - started
        scores = span_scores(predicted, gold(test, linker.bundle.kb))
        detection = evaluate_ner(detector, test)["strict"] if detector else None
    return {"scores": scores, "documents": len(test), "docs_per_s": len(test) / seconds, "rss_mb": _peak_rss_mb(),
            "characters": sum(len(d.text) for d in test), "detection": detection}


def predictions(linker: Linker, docs: list[Document]) -> list[tuple]:
    """(document id, start, end, concept) of every mention `linker` finds in `docs`."""
    return [(document.id, m.start, m.end, m.concept.concept_id) for batch in batched(docs, BATCH)
            for document in linker.link_documents(batch) for m in document.mentions]


def _in_child(function, *args):
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(function, args)


def best_params(grids: list[dict]) -> tuple[dict, float]:
    """The grid point with the best mean dev F1 over the tuned corpora."""
    mean = {point: sum(grid[point] for grid in grids) / len(grids) for point in grids[0]}
    point = max(mean, key=mean.get)
    recall, link, overlap = point.split("|")
    return {"recall_threshold": float(recall), "link_threshold": float(link), "overlap": overlap}, mean[point]


def report(runs: list[tuple], tuned: dict, filters: dict, tuning_sets: list[str], detectors: dict) -> str:
    dev = " and ".join(f"{CORPORA[key].name} dev" for key in tuning_sets)
    command = portable(" ".join(["python benchmarks/end_to_end.py", *sys.argv[1:]]))
    lines = [f"## {time.strftime('%Y-%m-%d')} — end-to-end linking (commit `{commit()}`)", "",
             f"Command: `{command}` · machine: {machine()}", "",
             f"Thresholds chosen on dev (mean strict F1 of {dev}):", ""]
    lines += [f"- {system}: {params} (dev mean F1 {f1:.3f})" for system, (params, f1) in tuned.items()]
    for (corpus, ratio), (path, link_threshold) in filters.items():
        keep = json.loads((Path(path) / "babelink_filter.json").read_text())["threshold"]
        lines.append(f"- filter of {corpus} (R = {ratio:.0%}): trained and applied on proposals at link threshold "
                     f"{link_threshold}, keep-threshold {keep} (dev): `{portable(str(path))}`")
    for corpus, (path, link_threshold, f1) in detectors.items():
        lines.append(f"- learned detector of {corpus}: `{portable(str(path))}`, link threshold {link_threshold} "
                     f"(dev F1 {f1:.3f})")
    for corpus_key, system, ratio, result in runs:
        if result["detection"]:
            d = result["detection"]
            lines.append(f"- detection only, {CORPORA[corpus_key].name} test: strict P {d['precision']:.3f}, "
                         f"R {d['recall']:.3f}, F1 {d['f1']:.3f}")
    lines += ["", ("| corpus | system | R | strict P | strict R | strict F1 | partial P | partial R | partial F1 | "
              "gold | docs/s | peak RSS MB |"), "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for corpus_key, system, ratio, result in runs:
        s, p = result["scores"]["strict"], result["scores"]["partial"]
        lines.append(
            f"| {CORPORA[corpus_key].name} | {system} | {ratio:.0%} | {s['precision']:.3f} | {s['recall']:.3f} | "
            f"**{s['f1']:.3f}** | {p['precision']:.3f} | {p['recall']:.3f} | {p['f1']:.3f} | {s['gold']:,} | "
            f"{result['docs_per_s']:.1f} | {result['rss_mb']:.0f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="+", default=["ncbi", "bc5cdr", "mantra-en", "mantra-es", "mantra-fr"],
                        choices=list(CORPORA))
    parser.add_argument("--dft-ratios", nargs="+", type=float, default=[0.2])
    parser.add_argument("--filter-minutes", type=float, default=20.0)
    parser.add_argument(
        "--filter-layers", type=int, default=None, help="train the filter on the encoder's first N layers"
    )
    parser.add_argument("--filter-link-threshold", type=float, default=None,
                        help="link threshold of the filtered system (default: the tuned unfiltered one): a lower one "
                             "gives the filter more proposals to choose from")
    parser.add_argument("--filter-sets", nargs="*", default=None, choices=list(CORPORA),
                        help="corpora that get a trained filter (default: every one with a training split)")
    parser.add_argument("--ner", nargs="*", default=[], metavar="CORPUS=DIR",
                        help="learned detectors (`babelink train ner` on the corpus's train split) to run as a system")
    parser.add_argument("--lazy", action="store_true", help=f"run {LAZY_SYSTEM!r} too")
    parser.add_argument("--encoder", action="append", default=[], metavar="NAME",
                        help="run the default linker over bundles built with this encoder too (a packaged trained "
                             "encoder's name or a checkpoint directory)")
    parser.add_argument("--tune", action="store_true", help="print the dev grids too")
    args = arguments(parser.description, parser)
    if malformed := [item for item in args.ner if "=" not in item]:
        parser.error(f"--ner takes CORPUS=DIR, got {malformed[0]!r}")
    ner_dirs = dict(item.split("=", 1) for item in args.ner)
    for name in args.encoder:  # a wrong name fails here, not in a child process after the first systems ran
        try:
            require_checkpoint(checkpoint_path(name))
        except BabelinkError as error:
            parser.error(f"--encoder: {error}")
    if unknown := set(ner_dirs) - set(args.sets):
        parser.error(f"--ner for corpora not in --sets: {', '.join(sorted(unknown))}")
    data = str(args.data)
    tuning_sets = [key for key in args.sets if CORPORA[key].dev]
    tuned = {}
    systems = ("sparse baseline", "hybrid + spans", *((LAZY_SYSTEM,) if args.lazy else ()),
               *(ENCODER_SYSTEM + name for name in args.encoder))
    for system in systems:
        grids = [_in_child(tune_step, data, key, system, args.dft_ratios[0]) for key in tuning_sets]
        tuned[system] = best_params(grids)
        if args.tune:
            print(system, json.dumps(dict(zip(tuning_sets, grids)), indent=1), file=sys.stderr)
        print(f"tuned {system}: {tuned[system]}", file=sys.stderr)
    runs, filters, detectors = [], {}, {}
    for key in args.sets:
        if key in ner_dirs:
            grid = _in_child(ner_tune_step, data, key, ner_dirs[key], tuned["hybrid + spans"][0])
            link = max(grid, key=grid.get)
            detectors[CORPORA[key].name] = (ner_dirs[key], float(link), grid[link])
            params = {**tuned["hybrid + spans"][0], "link_threshold": float(link)}
            runs.append(
                (key, NER_SYSTEM, 1.0, _in_child(run_step, data, key, NER_SYSTEM, 1.0, params, None, ner_dirs[key]))
            )
            print(f"ran {key} / ner (dev grid {grid}): {runs[-1][3]['scores']['strict']}", file=sys.stderr)
        for system in systems:
            for ratio in args.dft_ratios if system != "sparse baseline" and CORPORA[key].train else [0.0]:
                runs.append((key, system, ratio, _in_child(run_step, data, key, system, ratio, tuned[system][0], None)))
                print(f"ran {key} / {system} / {ratio}: {runs[-1][3]['scores']['strict']}", file=sys.stderr)
        if not CORPORA[key].train or (args.filter_sets is not None and key not in args.filter_sets):
            continue
        filter_params = {**tuned["hybrid + spans"][0], **({} if args.filter_link_threshold is None
                                                           else {"link_threshold": args.filter_link_threshold})}
        for ratio in args.dft_ratios:
            path = _in_child(filter_step, data, key, ratio, filter_params, args.filter_minutes, args.filter_layers)
            filters[key, ratio] = (path, filter_params["link_threshold"])
            runs.append((key, "hybrid + spans + filter", ratio,
                         _in_child(run_step, data, key, "hybrid + spans", ratio, filter_params, path)))
            print(f"ran {key} / filter / {ratio}: {runs[-1][3]['scores']['strict']}", file=sys.stderr)
    publish(report(runs, tuned, filters, tuning_sets, detectors), not args.no_write, "end-to-end")


if __name__ == "__main__":
    main()
