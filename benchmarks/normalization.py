"""Normalization benchmark: exact match, sparse TF-IDF and references on the four benchmark sets.

    python benchmarks/normalization.py [--data ../shared/data] [--no-write]

Builds one bundle per KB (open-umls; CTD MEDIC), then scores each system on XL-BEL v0.0
(visible languages, in-KB), Mantra GSC (in-KB), NCBI-disease test and BC5CDR-Disease test.
Every build and every system runs in its own process, so peak RSS is that step's alone.
Appends a dated section to BENCHMARKS.md unless --no-write.
"""

from __future__ import annotations

import multiprocessing
import resource
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from report import arguments, commit, machine, publish

from babelink.eval import benchmark
from babelink.index.sparse import TfidfNameIndex, TfidfParams
from babelink.kb.readers import read_kb
from babelink.kb.store import load_kb
from babelink.link.bundle import build_bundle, load_bundle
from babelink.link.candidates import ExactMatchGenerator, SparseGenerator
from babelink.link.pipeline import Linker

KBS = {"open-umls": "kb/open-umls/MRCONSO.RRF", "ctd-medic": "kb/ctd-medic/CTD_diseases.tsv.gz"}
SETS = {"open-umls": ("xlbel", "mantra"), "ctd-medic": ("ncbi", "bc5cdr")}
SYSTEMS = {
    "exact match": "dictionary baseline: normalised string equality",
    "sparse": "babelink default: char_wb 2–4-gram TF-IDF, shortlist + exact rescoring",
    "sparse exhaustive": "same vectors, cosine against every name (the shortlist's reference)",
    "char-3-gram exhaustive": "reference point of the issue: plain char 3-gram TF-IDF, exact cosine",
}
CHAR3 = TfidfParams(analyzer="char", ngram_min=3, ngram_max=3, sublinear_tf=False, exhaustive=True)


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def build_step(kb_path: str, out: str) -> dict:
    started = time.perf_counter()
    kb = read_kb(kb_path)
    read_seconds = time.perf_counter() - started
    build_bundle(kb, out)
    total = time.perf_counter() - started
    started = time.perf_counter()
    load_kb(Path(out) / "kb")
    return {"read_s": read_seconds, "index_s": total - read_seconds, "total_s": total,
            "kb_load_s": time.perf_counter() - started, "rss_mb": _peak_rss_mb(),
            "names": kb.num_names, "concepts": len(kb)}


def system_step(bundle_path: str, system: str, data: str, set_names: tuple[str, ...]) -> dict:
    started = time.perf_counter()
    bundle = load_bundle(bundle_path)
    load_seconds = time.perf_counter() - started
    if system == "exact match":
        generator = ExactMatchGenerator(bundle.kb, bundle.names)
    elif system == "sparse":
        generator = SparseGenerator(bundle.kb, bundle.names, bundle.sparse)
    elif system == "sparse exhaustive":
        index = TfidfNameIndex(replace(bundle.sparse.params, exhaustive=True), bundle.sparse.vectorizer, bundle.sparse.matrix)
        generator = SparseGenerator(bundle.kb, bundle.names, index)
    else:
        generator = SparseGenerator(bundle.kb, bundle.names, TfidfNameIndex.fit(bundle.names.strings, CHAR3))
    linker = Linker(bundle, generator)

    def normalize(mentions: list[str]) -> list[list[str]]:
        return [[c.concept_id for c in candidates] for candidates in linker.normalize(mentions, top_k=5)]

    results = {}
    for set_name in set_names:
        query_set = {
            "xlbel": lambda: benchmark.xlbel_set(Path(data), bundle.kb),
            "mantra": lambda: benchmark.mantra_set(Path(data), bundle.kb),
            "ncbi": lambda: benchmark.ncbi_set(Path(data), bundle.kb),
            "bc5cdr": lambda: benchmark.bc5cdr_set(Path(data), bundle.kb),
        }[set_name]()
        results[query_set.name] = benchmark.run_normalization(normalize, query_set)
    return {"results": results, "load_s": load_seconds, "rss_mb": _peak_rss_mb()}


def _in_child(function, *args):
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(function, args)


def report(builds: dict, runs: dict) -> str:
    lines = [f"## {time.strftime('%Y-%m-%d')} — normalization (commit `{commit()}`)", "",
             f"Command: `python benchmarks/normalization.py` · machine: {machine()}", "",
             "Index build (read KB + normalise + fit TF-IDF + write bundle), each in its own process:", "",
             "| KB | concepts | names | read KB s | index s | total s | KB store load s | peak RSS MB |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for kb_name, b in builds.items():
        lines.append(f"| {kb_name} | {b['concepts']:,} | {b['names']:,} | {b['read_s']:.1f} | {b['index_s']:.1f} | "
                     f"{b['total_s']:.1f} | {b['kb_load_s']:.2f} | {b['rss_mb']:.0f} |")
    lines += ["", "Systems: " + "; ".join(f"**{name}**: {what}" for name, what in SYSTEMS.items()) + ".", "",
              "| set | KB | in-KB queries / read | system | Acc@1 | Acc@5 | MAP | mentions/s | × exhaustive speed | peak RSS MB |",
              "|---|---|---:|---|---:|---:|---:|---:|---:|---:|"]
    per_language = []
    for kb_name, systems in runs.items():
        first = next(iter(systems.values()))["results"]
        for set_name in first:
            reference_speed = systems["sparse exhaustive"]["results"][set_name]["mentions_per_second"]
            for system, run in systems.items():
                r = run["results"][set_name]
                o = r["overall"]
                lines.append(f"| {set_name} | {kb_name} | {o['count']:,} / {r['read']:,} | {system} | {o['acc@1']:.3f} | "
                             f"{o['acc@5']:.3f} | {o['map']:.3f} | {r['mentions_per_second']:,.0f} | "
                             f"{r['mentions_per_second'] / reference_speed:.1f} | {run['rss_mb']:.0f} |")
                if r.get("groups"):
                    cells = " | ".join(f"{g['acc@1']:.3f} / {g['acc@5']:.3f}" for g in r["groups"].values())
                    macro = sum(g["acc@1"] for g in r["groups"].values()) / len(r["groups"])
                    per_language.append((set_name, system, list(r["groups"]), cells, macro))
    for set_name in dict.fromkeys(row[0] for row in per_language):
        rows = [row for row in per_language if row[0] == set_name]
        languages = rows[0][2]
        lines += ["", f"{set_name}, Acc@1 / Acc@5 per language (n = in-KB queries) and the unweighted mean of Acc@1:", "",
                  "| system | " + " | ".join(languages) + " | mean Acc@1 |", "|---|" + "---:|" * (len(languages) + 1)]
        lines += [f"| {system} | {cells} | {macro:.3f} |" for _, system, _, cells, macro in rows]
    return "\n".join(lines) + "\n"


def main() -> None:
    args = arguments(__doc__.splitlines()[0])
    if not (args.data / "READY").is_file():
        sys.exit(f"benchmark data not found at {args.data}")
    builds, runs = {}, {}
    with tempfile.TemporaryDirectory() as scratch:
        for kb_name, kb_file in KBS.items():
            bundle_path = str(Path(scratch) / kb_name)
            builds[kb_name] = _in_child(build_step, str(args.data / kb_file), bundle_path)
            print(f"built {kb_name}: {builds[kb_name]}", file=sys.stderr)
            runs[kb_name] = {}
            for system in SYSTEMS:
                runs[kb_name][system] = _in_child(system_step, bundle_path, system, str(args.data), SETS[kb_name])
                print(f"ran {kb_name} / {system}", file=sys.stderr)
    publish(report(builds, runs), write=not args.no_write)


if __name__ == "__main__":
    main()
