"""Normalization in languages without a corpus: a KB's names in one language, searched in the KB without them.

    python benchmarks/held_out_names.py [--data ../shared/data] [--no-write] [--languages tr,cs,…]
        [--size 400] [--encoder NAME|DIR]

The visible corpora are in five languages; babelink is also judged in others (XL-BEL has ten).
open-umls names concepts in a dozen more (Turkish, Czech, Dutch, Portuguese, Italian, Vietnamese,
Greek from HPO's translations), so each of them can stand in for an unseen language: for a language
L, `benchmark.held_out_names_set` samples `--size` of L's name strings (seeded; those the rest of
the KB holds as written left out), and each is normalised against a bundle of open-umls without
L's names (built once per language and code version, `--index lazy`). Systems: **sparse**, the
**hybrid** (the default retriever) and the **hybrid + translations** with the MUSE lexicons of all
15 languages, the language guessed as `normalize` guesses it (Czech, Vietnamese and Greek have no
lexicon: their rows say what translation costs a language it cannot read). Concept-level Acc@1 and
Acc@5 per language, and their unweighted means over the languages that have a lexicon and over all.

`--encoder` adds the hybrid systems over bundles built with a trained encoder (a packaged
artefact's name or a checkpoint directory) beside the bundled encoder's, the same run's baseline.
An artefact trained on the KB's synonyms has seen the languages its manifest does not list as held
out: the section names them, and only the others measure an unseen language.
"""

from __future__ import annotations

import argparse
import multiprocessing
import shlex
import sys
import time
from pathlib import Path

from normalization import LEXICONS
from report import arguments, cached_bundle, commit, machine, publish

from babelink.bundle.store import load_bundle
from babelink.eval import benchmark
from babelink.index.dense import DenseParams
from babelink.kb.readers import read_kb
from babelink.linker import Linker
from babelink.retrieve.generators import SparseGenerator
from babelink.retrieve.translation import TranslatingGenerator
from babelink.translate import Renderer, english_words, read_lexicons

KB = "open-umls"
KB_FILE = "kb/open-umls/MRCONSO.RRF"
SYSTEMS = ("sparse", "hybrid", "hybrid + translations")
TRAINED_SYSTEMS = ("hybrid", "hybrid + translations")


def language_step(data: str, lang: str, size: int, encoder: str) -> dict:
    """Every system of one held-out language (in its own process: one bundle's memory at a time)."""
    kb = read_kb(Path(data) / KB_FILE)
    query_set, _ = benchmark.held_out_names_set(kb, lang, size)
    del kb
    encoders = ["default", *([encoder] if encoder != "default" else [])]
    lexicon = read_lexicons([Path(data) / LEXICONS])
    results = {}
    for name in encoders:
        options = {} if name == "default" else {"encoder": name}
        bundle = load_bundle(cached_bundle(Path(data), KB, without_lang=lang, dense_params=DenseParams(kind="lazy"),
                                           **options))
        label = "" if name == "default" else f", {Path(name).name}"
        plain = Linker(bundle)
        generators = {
            "sparse": SparseGenerator(bundle.kb, bundle.names, bundle.sparse),
            "hybrid": plain.generator,
            "hybrid + translations": TranslatingGenerator(
                plain.generator, Renderer(lexicon, english_words(bundle.kb)), bundle.names),
        }
        for system in SYSTEMS if name == "default" else TRAINED_SYSTEMS:
            linker = Linker(bundle, generators[system])
            def normalize(mentions, linker=linker):
                return [[c.concept_id for c in found] for found in linker.normalize(mentions, top_k=5)]
            results[system + label] = benchmark.run_normalization(normalize, query_set)["overall"]
    return {"n": len(query_set.queries), "read": query_set.read, "lexicon": lang in lexicon.languages,
            "results": results}


def held_out_languages(data: Path, given: str | None) -> list[str]:
    """The `given` comma-separated languages, each checked against the KB's, or by default
    `benchmark.held_out_name_languages`."""
    kb = read_kb(data / KB_FILE)
    if given is None:
        return benchmark.held_out_name_languages(kb)
    counts = kb.languages()
    languages = [lang.strip() for lang in given.split(",") if lang.strip()]
    unknown = [lang for lang in languages if lang not in counts or lang == "en"]
    if unknown or not languages:
        listed = ", ".join(f"{lang} ({count:,} names)" for lang, count in counts.items() if lang != "en")
        sys.exit(f"--languages: {', '.join(unknown) or 'none given'}: not a language of {KB_FILE} other than English "
                 f"(it has: {listed})")
    return languages


def trained_on(encoder: str, languages: list[str]) -> str:
    """What the artefact's manifest says about the measured languages: which it held out of training."""
    from babelink.encoders.artefacts import packaged, read_manifest

    artefact = packaged().get(encoder)
    if artefact is None:
        return f"`{encoder}` is no packaged artefact: which languages it trained on is not recorded here"
    hold_out = set(read_manifest(artefact)["training"].get("hold_out", ()))
    seen = [lang for lang in languages if lang not in hold_out]
    held = f"`{encoder}` held {', '.join(sorted(hold_out)) or 'no language'} out of training"
    if not seen:
        return f"{held}: every language here is one it never trained on"
    return f"{held}; its rows for {', '.join(seen)} measure languages it trained on, not unseen ones"


def report(runs: dict, size: int, encoder: str, command: str, measured_at: str) -> str:
    """The section: one row per language, means, and what a trained encoder saw."""
    systems = list(next(iter(runs.values()))["results"])
    lines = [f"## {time.strftime('%Y-%m-%d')} — KB names of a held-out language (commit `{measured_at}`)", "",
             f"Command: `{command}` · machine: {machine()}", "",
             (f"Data: `../shared/data/{KB_FILE}`; per language, {size} of its name strings drawn by a seeded hash "
             "(seed 0) among those whose concept keeps a name in another language and that no other language's "
             "name spells alike, normalised against a lazy-index bundle of the KB without that language's names. "
             f"Translations: `../shared/data/{LEXICONS}` (language guessed). The **hybrid** is the baseline; "
             "Acc@1 / Acc@5 per language (n = queries / distinct name strings of the language):"), "",
             "| language | n | MUSE lexicon | " + " | ".join(systems) + " |",
             "|---|---:|---|" + "---:|" * len(systems)]
    for lang, run in runs.items():
        cells = " | ".join(f"{run['results'][s]['acc@1']:.3f} / {run['results'][s]['acc@5']:.3f}" for s in systems)
        lines.append(f"| {lang} | {run['n']:,} / {run['read']:,} | {'yes' if run['lexicon'] else 'no'} | {cells} |")
    lines += ["", "Unweighted means of Acc@1 over the languages:", "",
              "| languages | system | mean Acc@1 |", "|---|---|---:|"]
    for label, chosen in (("with a MUSE lexicon", [lang for lang, r in runs.items() if r["lexicon"]]),
                          ("all", list(runs))):
        for system in systems if chosen else ():
            mean = sum(runs[lang]["results"][system]["acc@1"] for lang in chosen) / len(chosen)
            lines.append(f"| {label} ({', '.join(chosen)}) | {system} | {mean:.3f} |")
    if encoder != "default":
        lines += ["", trained_on(encoder, list(runs)) + "."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--languages", help="comma-separated ISO 639-1 codes (default: the KB's languages but "
                                            f"English with at least {benchmark.HELD_OUT_MIN_NAMES:,} names)")
    parser.add_argument("--size", type=int, default=400, help="name strings sampled per language (default 400)")
    parser.add_argument("--encoder", default="default",
                        help="also run over bundles of this trained encoder: a packaged artefact's name or a "
                             "checkpoint directory")
    args = arguments(parser.description, parser)
    if not (args.data / "READY").is_file():
        sys.exit(f"benchmark data not found at {args.data}")
    if args.size < 1:
        sys.exit(f"--size: {args.size}: sample at least one name per language")
    languages = held_out_languages(args.data, args.languages)
    measured_at = commit()  # the code measured, whatever is edited while it runs
    runs = {}
    for lang in languages:
        with multiprocessing.get_context("spawn").Pool(1) as pool:
            runs[lang] = pool.apply(language_step, (str(args.data), lang, args.size, args.encoder))
        print(f"ran {lang}: {runs[lang]}", file=sys.stderr)
    command = shlex.join(["python", "benchmarks/held_out_names.py", *sys.argv[1:]])
    publish(report(runs, args.size, args.encoder, command, measured_at), not args.no_write, "normalization")


if __name__ == "__main__":
    main()
