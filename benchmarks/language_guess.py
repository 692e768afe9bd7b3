"""A text's language guessed by the n-gram classifier or by stop words alone: accuracy, and `link` without `--lang`.

    python benchmarks/language_guess.py [--data ../shared/data] [--no-write]

`link` guesses each segment's language when none is given, to choose its stop words and the
lexicon its spans are rendered through (`detect.language.guess_language`). Reported, one run:
(1) how often each guess names the language of every document of the visible corpora (Mantra GSC
en/es/fr: short Medline titles and drug-label sentences; QUAERO train and dev: French titles and
labels; NCBI-disease and BC5CDR-Disease dev: English abstracts); (2) strict P/R/F1 of `link` with
the language guessed by stop words alone (the rule before, baseline), by the classifier (the
default), and given (the ceiling), on open-umls typed by HPO with the shared MUSE lexicons (as in
`benchmarks/calibrate.py`) and on the embedded default (gold ids matched through each concept's
codes as in `benchmarks/modifiers.py`).
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import replace
from functools import partial

from calibrate import CORPORA, _documents
from modifiers import code_index, gold_by_codes
from recall_gate import MUSE
from report import arguments, cached_bundle, commit, machine, publish, shared_path

import babelink.link.documents as documents_module
from babelink import augment
from babelink.bundle.store import load_bundle
from babelink.detect.language import guess_language
from babelink.detect.stopwords import guess_from_stopwords
from babelink.detect.tokenize import tokenize
from babelink.eval.metrics import span_scores
from babelink.linker import Linker
from babelink.train.context_filter import gold_mentions
from babelink.translate import read_lexicons

LINKED = {"open-umls + MUSE": ("Mantra en", "Mantra es", "Mantra fr", "QUAERO dev"),
          "embedded default": ("Mantra es", "Mantra fr")}
GUESSES = {"stop words (baseline)": lambda text, tokens, prefer: guess_from_stopwords(tokens, prefer),
           "classifier, stop words where unsure (default)": guess_language}
GIVEN = "language given (ceiling)"


def _accuracy_rows(data, prefer) -> list[str]:
    rows = []
    for corpus, (_, _, lang, _) in CORPORA.items():
        texts = [document.text for document in _documents(data, corpus)]
        cells = []
        for guess in GUESSES.values():
            guessed = Counter(guess(text, tokenize(text), prefer) for text in texts)
            wrong = ", ".join(f"{code or 'none'} {count}" for code, count in guessed.most_common() if code != lang)
            cells.append(f"{guessed[lang] / len(texts):.3f} ({wrong or '—'})")
        rows.append(f"| {corpus} | {lang} | {len(texts):,} | " + " | ".join(cells) + " |")
        print(rows[-1], flush=True)
    return rows


def _link_rows(name: str, linker: Linker, gold_of, data) -> list[str]:
    rows = []
    for corpus in LINKED[name]:
        given = _documents(data, corpus)
        gold = [(*key, ids) for key, ids in gold_of(given).items()]
        unknown = [replace(document, lang=None) for document in given]
        runs = {system: (unknown, guess) for system, guess in GUESSES.items()} | {GIVEN: (given, guess_language)}
        for system, (documents, guess) in runs.items():
            documents_module.guess_language = guess
            try:
                linked = linker.documents.link(documents)
            finally:
                documents_module.guess_language = guess_language
            found = [(document.id, m.start, m.end, m.candidates[0].concept_id)
                     for document, result in zip(documents, linked) for m in result.mentions]
            strict = span_scores(found, gold)["strict"]
            rows.append(f"| {name} · {corpus} | {len(documents):,} | {system} | {strict['precision']:.3f} | "
                        f"{strict['recall']:.3f} | **{strict['f1']:.3f}** |")
            print(rows[-1], flush=True)
    return rows


def main() -> None:
    args = arguments(__doc__.splitlines()[0])
    started = time.perf_counter()
    bundle = replace(load_bundle(cached_bundle(args.data, "open-umls", types="hpo")),
                     lexicon=read_lexicons([args.data / MUSE]))
    umls = Linker(bundle, encoder=bundle.query_encoder())
    accuracy = _accuracy_rows(args.data, umls.documents.languages)
    resolver = augment.gold_resolver(bundle.kb)
    link_rows = _link_rows("open-umls + MUSE", umls, lambda documents: gold_mentions(documents, resolver), args.data)
    default = Linker.open()
    codes = code_index(default.bundle.kb)


    link_rows += _link_rows("embedded default", default, partial(gold_by_codes, codes=codes), args.data)
    lines = [
        f"## {time.strftime('%Y-%m-%d')} — a text's language, guessed (commit `{commit()}`)", "",
        (f"Command: `python benchmarks/language_guess.py` · bundles: open-umls typed by HPO with "
         f"`{shared_path(args.data / MUSE)}` and the embedded default ({default.bundle.provenance['bundle']}) · "
         f"machine: {machine()}"), "",
        ("Share of documents whose guessed language is the corpus's (the other guesses and their counts), ties "
         "broken toward the languages the open-umls bundle reads:"), "",
        "| corpus | lang | documents | " + " | ".join(GUESSES) + " |", "|---|---|---:|" + "---|" * len(GUESSES),
        *accuracy, "",
        "`link` without `--lang`, strict P/R/F1, each guess on one loaded linker:", "",
        "| workload | documents | language | strict P | strict R | strict F1 |", "|---|---:|---|---:|---:|---:|",
        *link_rows, "",
        f"Run time {time.perf_counter() - started:.0f} s.", "",
    ]
    publish("\n".join(lines), not args.no_write, "end-to-end")


if __name__ == "__main__":
    main()
