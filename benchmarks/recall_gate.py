"""The recall gate of `link`: spans sent to the ranker, speed and output, previous gate against current.

    python benchmarks/recall_gate.py [--data ../shared/data] [--no-write]

`link` ranks (encodes) only the candidate spans whose best TF-IDF cosine, through the mention and
its renderings, reaches `LinkParams.recall_threshold`. Each corpus is linked twice in one process on
one loaded bundle: at the previous default gate (0.5, the baseline) and at the current default,
everything else at its default. Bundles as in the calibration benchmark: open-umls typed by HPO
with the shared MUSE lexicons (Mantra GSC en/es/fr, QUAERO train and dev), CTD MEDIC (NCBI-disease
and BC5CDR-Disease dev, the sets the gate was chosen on with Mantra and QUAERO, and their test sets,
which were not). Reported: documents/s, span strings ranked, strict P/R/F1, and how many of the
baseline's mentions (offsets and concept) the current gate keeps.
"""

from __future__ import annotations

import time
from dataclasses import replace

from calibrate import CORPORA, _documents
from report import arguments, cached_bundle, commit, machine, publish, shared_path

from babelink import augment
from babelink.bundle.store import load_bundle
from babelink.eval.metrics import span_scores
from babelink.link.documents import LinkParams
from babelink.linker import Linker
from babelink.train.context_filter import gold_mentions
from babelink.translate import read_lexicons

PREVIOUS_GATE = 0.5
MUSE = "translations/muse"
TEST_SETS = {
    "NCBI-disease test": ("ctd-medic", ("ncbi_disease/NCBItestset_corpus.txt",), "en", None),
    "BC5CDR-Disease test": ("ctd-medic", ("bc5cdr/CDR_TestSet.PubTator.txt",), "en", ("Disease",)),
}


class CountingGenerator:
    """The ranker, counting the span strings it is asked to rank."""

    def __init__(self, inner):
        self.inner, self.ranked = inner, 0

    def generate(self, normalized, top_k, capitals=None, langs=None):
        self.ranked += len(normalized)
        return self.inner.generate(normalized, top_k, capitals, langs)


def run(linker: Linker, encoder, documents: list, gate: float) -> dict:
    """Link `documents` at `gate`, the encoder cache emptied first."""
    ranker = CountingGenerator(linker.documents.ranker)
    documents_linker = replace(linker.documents, ranker=ranker,
                               params=replace(linker.documents.params, recall_threshold=gate))
    encoder.clear()
    started = time.perf_counter()
    linked = documents_linker.link(documents)
    seconds = time.perf_counter() - started
    mentions = {(document.id, m.start, m.end, m.candidates[0].concept_id)
                for document, found in zip(documents, linked) for m in found.mentions}
    return {"seconds": seconds, "ranked": ranker.ranked, "mentions": mentions}


def main() -> None:
    args = arguments(__doc__.splitlines()[0])
    lexicon = read_lexicons([args.data / MUSE])
    bundles = {"open-umls": replace(load_bundle(cached_bundle(args.data, "open-umls", types="hpo")), lexicon=lexicon),
               "ctd-medic": load_bundle(cached_bundle(args.data, "ctd-medic"))}
    linkers = {}
    current = LinkParams().recall_threshold
    rows = []
    for corpus, spec in {**CORPORA, **TEST_SETS}.items():
        kb_name, _, lang, _ = spec
        documents = _documents(args.data, corpus, spec)
        if kb_name not in linkers:
            encoder = bundles[kb_name].query_encoder()
            linkers[kb_name] = (Linker(bundles[kb_name], encoder=encoder), encoder)
            run(*linkers[kb_name], documents, PREVIOUS_GATE)  # untimed: fills the page cache of the indexes
        linker, encoder = linkers[kb_name]
        gold = [(doc_id, start, end, ids) for (doc_id, start, end), ids in
                gold_mentions(documents, augment.gold_resolver(linker.bundle.kb)).items()]
        results = {gate: run(linker, encoder, documents, gate) for gate in (PREVIOUS_GATE, current)}
        baseline = results[PREVIOUS_GATE]["mentions"]
        for gate, result in results.items():
            strict = span_scores(result["mentions"], gold)["strict"]
            rate = len(documents) / result["seconds"]
            base_rate = len(documents) / results[PREVIOUS_GATE]["seconds"]
            label = f"{gate} (previous default, baseline)" if gate == PREVIOUS_GATE else f"**{gate}** (default)"
            rows.append(f"| {corpus} | {lang} | {len(documents):,} | {label} | {result['ranked']:,} | {rate:.2f} | "
                        f"{rate / base_rate:.2f} | {strict['precision']:.3f} / {strict['recall']:.3f} / "
                        f"{strict['f1']:.3f} | {len(result['mentions'] & baseline):,} of {len(baseline):,} |")
            print(rows[-1], flush=True)
    lines = [
        f"## {time.strftime('%Y-%m-%d')} — the recall gate of `link` (commit `{commit()}`)", "",
        (f"Command: `python benchmarks/recall_gate.py` · lexicons on open-umls: `{shared_path(args.data / MUSE)}` · "
        f"machine: {machine()}"), "",
        (f"Each corpus linked twice in one process, default `LinkParams` but the recall gate: {PREVIOUS_GATE} "
         f"(the previous default, baseline) and {current} (the default). Encoder cache emptied before each run, "
         "after one untimed run per bundle that fills the page cache. Span strings ranked: the distinct span "
         "strings whose TF-IDF cosine (through the mention and its renderings) cleared the gate, each one encoded "
         "unless it is a KB name. Dev sets chose the gate (`benchmarks/log/notes.md`); the test sets did not."), "",
        ("| corpus | lang | documents | recall gate | span strings ranked | documents/s | × baseline | "
        "strict P / R / F1 | baseline mentions kept |"),
        "|---|---|---:|---|---:|---:|---:|---|---|",
        *rows, ""]
    publish("\n".join(lines), not args.no_write, "end-to-end")


if __name__ == "__main__":
    main()
