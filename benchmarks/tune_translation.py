"""Translation fusion weight, tuned and checked leave-one-language-out on the visible languages.

    python benchmarks/tune_translation.py [--lexicons DIR_OR_FILE ...] [--data ../shared/data] [--no-write]

Searches every in-KB query of XL-BEL v0.0 (en, es, de, zh, ja), Mantra GSC (en, es, fr) and QUAERO
train and dev (fr) with the default open-umls hybrid bundle, as written and through its English
renderings (`babelink.translate`, lexicons default to `../shared/data/translations/muse`), with the
language guessed from the lexicons as `normalize` without `--lang` does (and, for comparison,
given). Each fusion rule and parameter is then scored per language from the same search results:
the product's maximum (`retrieve.translation.fuse`), a discounted maximum and a weighted mix, the
latter two computed here only. Leave-one-language-out: for each language, the parameter with the
best mean Acc@1 over the *other* languages is chosen and the left-out language is reported at it.
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict
from pathlib import Path

from report import arguments, cached_bundle, commit, machine, publish, shared_path

from babelink.bundle.store import load_bundle
from babelink.eval import benchmark
from babelink.linker import generator_for
from babelink.retrieve.translation import TranslatingGenerator, fuse
from babelink.text import normalize_name, written_in_capitals
from babelink.translate import Renderer, english_words, read_lexicons

#: Concepts each query contributes to the fusion: the five `normalize` returns by default.
DEPTH = 5


def _scores(original, translated):
    """Each concept's original score and best rendering score (None where a search missed it),
    and the original search's floor."""
    own = {candidate.concept_id: candidate.score for candidate in original}
    best = {}
    for _, candidates in translated:
        for candidate in candidates:
            best[candidate.concept_id] = max(best.get(candidate.concept_id, -1.0), candidate.score)
    floor = original[-1].score if original else 0.0
    return {concept: (own.get(concept, floor), best.get(concept)) for concept in dict.fromkeys([*own, *best])}


def _linear(original, translated, weight):
    """`(1 − w)·s_o + w·s_t`, a missed concept at its search's floor: a rendering can demote."""
    floor_t = max((candidates[-1].score for _, candidates in translated if candidates), default=0.0)
    scores = {concept: (1 - weight) * s_o + weight * (floor_t if s_t is None else s_t)
              for concept, (s_o, s_t) in _scores(original, translated).items()}
    return sorted(scores, key=lambda concept: -scores[concept])


def _discounted_max(original, translated, discount):
    """`max(s_o, s_t − δ)`: the score stays a cosine of one query; δ = 0 is the product's `fuse`."""
    if discount == 0.0:
        return [candidate.concept_id for candidate in fuse(original, translated)]
    scores = {concept: max(s_o, -1.0 if s_t is None else s_t - discount)
              for concept, (s_o, s_t) in _scores(original, translated).items()}
    return sorted(scores, key=lambda concept: -scores[concept])


#: rule → (ranking function, parameter grid); each rule's first parameter value turns translation off.
RULES = {
    "linear": (_linear, (0.0, 0.2, 0.4, 0.5, 0.6, 0.7, 0.8, 1.0)),
    "discounted max": (_discounted_max, (1.0, 0.1, 0.05, 0.03, 0.02, 0.01, 0.0)),
}


def _query_sets(data: Path, kb) -> list[tuple[str, str, benchmark.QuerySet]]:
    """(set name, language, queries) for every visible language of every set."""
    sets = [("XL-BEL", lang, benchmark.xlbel_set(data, kb, (lang,))) for lang in benchmark.XLBEL_LANGUAGES]
    mantra = benchmark.mantra_set(data, kb)
    for lang in benchmark.MANTRA_LANGUAGES.values():
        queries = tuple(query for query in mantra.queries if query.lang == lang)
        sets.append(("Mantra", lang, benchmark.QuerySet("Mantra", queries, len(queries))))
    sets += [(f"QUAERO {split}", "fr", benchmark.quaero_set(data, kb, split)) for split in ("train", "dev")]
    return sets


def _accuracy(ranked: list[list[str]], gold: list[tuple[str, ...]], k: int) -> float:
    return sum(any(concept in answer for concept in ranking[:k]) for ranking, answer in zip(ranked, gold)) / len(gold)


def _search(translating: TranslatingGenerator, queries, lang_given: bool):
    """Per query: (original candidates, [(rendering, candidates)]), one batched generator call."""
    normalized = [normalize_name(query.mention) for query in queries]
    capitals = [written_in_capitals(query.mention) for query in queries]
    renderings = translating.renderings(normalized, [query.lang for query in queries] if lang_given else None)
    flat = normalized + [text for found in renderings for text in found]
    flat_capitals = capitals + [flag for flag, found in zip(capitals, renderings) for _ in found]
    results = translating.base.generate(flat, DEPTH, flat_capitals)
    out, position = [], len(normalized)
    for original, found in zip(results, renderings):
        out.append((original, list(zip(found, results[position : position + len(found)]))))
        position += len(found)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lexicons", nargs="+", help="lexicon files or directories (default: the shared MUSE ones)")
    args = arguments(parser.description, parser)
    specs = args.lexicons or [str(args.data / "translations" / "muse")]
    bundle = load_bundle(cached_bundle(args.data, "open-umls"))
    started = time.perf_counter()
    renderer = Renderer(read_lexicons(specs), english_words(bundle.kb))
    lexicon_seconds = time.perf_counter() - started
    translating = TranslatingGenerator(generator_for(bundle), renderer, bundle.names)
    sets = _query_sets(args.data, bundle.kb)

    # hits[mode][rule][param][(set, lang)] = [hits@1, hits@5, queries]
    hits = defaultdict(lambda: defaultdict(lambda: defaultdict(lambda: defaultdict(lambda: [0, 0, 0]))))
    rendered = defaultdict(int)
    for mode in ("guessed", "given"):
        for set_name, lang, query_set in sets:
            queries = query_set.queries
            searched = _search(translating, queries, mode == "given")
            rendered[(mode, lang)] += sum(bool(found) for _, found in searched)
            gold = [query.gold_ids for query in queries]
            for rule, (rank, grid) in RULES.items():
                for param in grid:
                    ranked = [rank(original, found, param) for original, found in searched]
                    cell = hits[mode][rule][param][(set_name, lang)]
                    cell[0] += _accuracy(ranked, gold, 1) * len(gold)
                    cell[1] += _accuracy(ranked, gold, 5) * len(gold)
                    cell[2] += len(gold)
    languages = sorted({lang for _, lang, _ in sets})

    def acc(mode, rule, param, lang, k=0, set_name=None):
        cells = [cell for (name, code), cell in hits[mode][rule][param].items()
                 if code == lang and set_name in (None, name)]
        return sum(cell[k] for cell in cells) / sum(cell[2] for cell in cells)

    def lolo(mode, rule, lang):
        """The rule's parameter chosen on every language but `lang` (ties: the gentler value)."""
        others = [other for other in languages if other != lang]
        grid = RULES[rule][1]
        return max(grid, key=lambda p: (sum(acc(mode, rule, p, o) for o in others), -grid.index(p)))

    lines = [f"## {time.strftime('%Y-%m-%d')} — translation fusion, leave-one-language-out (commit `{commit()}`)", "",
             (f"Command: `python benchmarks/tune_translation.py{_lexicon_option(specs, args.lexicons)}` · lexicons: "
              f"`{' '.join(map(shared_path, specs))}` (read in {lexicon_seconds:.1f} s) · bundle: default open-umls "
              f"hybrid, bundled encoder · machine: {machine()}"), "",
             ("Sets: in-KB queries of XL-BEL v0.0, Mantra GSC and QUAERO train + dev, pooled per language. Each rule's "
              "parameter is chosen for each language on the *other* languages (best mean Acc@1 over them) and the "
              "left-out language is scored at it. Rules: `linear` `(1 − w)·s_o + w·s_t` (a concept a search missed "
              "at its lowest returned score); `discounted max` `max(s_o, s_t − δ)`, whose δ = 0 is the product's "
              "`fuse`. Off: the original query alone, from the same search results."), ""]
    for mode in ("guessed", "given"):
        lines += [f"Language {mode}, leave-one-language-out (Acc@1 / Acc@5):", "",
                  "| lang | queries | rendered | off | " + " | ".join(f"{rule} (param)" for rule in RULES) + " |",
                  "|---|---:|---:|---:|" + "---:|" * len(RULES)]
        for lang in languages:
            off = RULES["linear"][1][0]
            row = [f"{acc(mode, rule, lolo(mode, rule, lang), lang):.3f} / "
                   f"{acc(mode, rule, lolo(mode, rule, lang), lang, 1):.3f} ({lolo(mode, rule, lang)})"
                   for rule in RULES]
            count = sum(cell[2] for (_, code), cell in hits[mode]["linear"][off].items() if code == lang)
            lines.append(f"| {lang} | {count} | {rendered[(mode, lang)]} | {acc(mode, 'linear', off, lang):.3f} / "
                         f"{acc(mode, 'linear', off, lang, 1):.3f} | " + " | ".join(row) + " |")
        lines += ["", (f"Language {mode}, XL-BEL v0.0 alone, each rule at its leave-one-language-out parameter "
                      "(Acc@1):"), "",
                  "| rule | " + " | ".join(benchmark.XLBEL_LANGUAGES) + " | mean |",
                  "|---|" + "---:|" * (len(benchmark.XLBEL_LANGUAGES) + 1)]
        for rule in ("off", *RULES):
            row = [acc(mode, "linear", 0.0, lang, set_name="XL-BEL") if rule == "off"
                   else acc(mode, rule, lolo(mode, rule, lang), lang, set_name="XL-BEL")
                   for lang in benchmark.XLBEL_LANGUAGES]
            lines.append(f"| {rule} | " + " | ".join(f"{v:.3f}" for v in row) + f" | {sum(row) / len(row):.3f} |")
        lines += ["", f"Language {mode}, every parameter (Acc@1 per language, all sets pooled):", "",
                  "| rule | param | " + " | ".join(languages) + " | mean |",
                  "|---|---:|" + "---:|" * (len(languages) + 1)]
        for rule, (_, grid) in RULES.items():
            for param in grid:
                row = [acc(mode, rule, param, lang) for lang in languages]
                lines.append(f"| {rule} | {param} | " + " | ".join(f"{v:.3f}" for v in row) +
                             f" | {sum(row) / len(row):.3f} |")
        lines.append("")
    publish("\n".join(lines), not args.no_write, "tuning")


def _lexicon_option(specs, given) -> str:
    return f" --lexicons {' '.join(map(shared_path, specs))}" if given else ""



if __name__ == "__main__":
    main()
