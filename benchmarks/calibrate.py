"""Calibrated link decisions: train the `normalize` and `link` models, check them leave-one-language-out.

    python benchmarks/calibrate.py [--lexicons DIR_OR_FILE ...] [--data ../shared/data] [--no-write]
        [--write-default] [--encoder NAME]

Data (visible dev annotations, several languages): XL-BEL v0.0 (en es de zh ja; every query, the
out-of-KB ones as NIL examples), Mantra GSC (en es fr), QUAERO train and dev (fr) on the open-umls
bundle with the translation lexicons (default: the shared MUSE ones); NCBI-disease dev and
BC5CDR-Disease dev (en) on CTD MEDIC. `normalize` examples are every annotated mention's five
candidates; `link` examples are the five candidates of every span the document linker proposes
above a low cosine floor, labelled right when the span is a gold mention of that concept.

Leave-one-language-out: for each language, both models are fitted, and the link floor, minimum
probability and overlap policy chosen, on the other languages only; the left-out language is
scored at them: reliability (predicted against observed accuracy in 10 bins), expected
calibration error, the NIL decision's precision and recall, and end-to-end strict and partial
F1 against today's link decision (cosine ≥ 0.98, no translation) and the same decision with
translation, from the same proposals. The open-umls bundle's concepts are typed by HPO's branches
(`build --types-from hp.obo`); each decision is scored as `link` makes it, leaving out spans
whose best concept is a clinical modifier (`link.modifiers`), and with them (the baseline), the
calibrator fitted on the proposals of each. `--write-default` fits both on every language, without
the modifier spans, and writes `babelink/retrieve/calibration.json`, the calibrator babelink ships.
`--encoder NAME`: the bundles are built with that packaged trained encoder, whose cosines lie
elsewhere than the bundled e5's; `--write-default` then writes its own calibrator beside it
(`babelink/encoders/trained/NAME.calibration.json`), which bundles encoded by it use.
"""

from __future__ import annotations

import argparse
import itertools
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from report import ROOT, arguments, cached_bundle, commit, machine, publish, shared_path

from babelink import augment
from babelink.bundle.store import load_bundle
from babelink.detect.overlaps import resolve_overlaps
from babelink.encoders.artefacts import packaged
from babelink.eval.linking import in_kb_gold
from babelink.eval.metrics import span_scores
from babelink.formats import read_documents
from babelink.formats.xlbel import read_xlbel
from babelink.fsutil import sha256_file
from babelink.link.modifiers import concept_types, is_modifier
from babelink.linker import Linker
from babelink.retrieve.calibration import (
    CALIBRATION_FILE,
    FEATURES,
    SHIPPED_SUFFIX,
    Calibrator,
    Model,
)
from babelink.train.calibration import PROPOSAL_FLOOR, link_proposals, link_rows, normalize_rows
from babelink.translate import read_lexicons

#: corpus → (KB, paths under bench/, language, annotation types kept)
CORPORA = {
    "Mantra en": ("open-umls", ("mantra_gsc/Mantra-GSC/English",), "en", None),
    "Mantra es": ("open-umls", ("mantra_gsc/Mantra-GSC/Spanish",), "es", None),
    "Mantra fr": ("open-umls", ("mantra_gsc/Mantra-GSC/French",), "fr", None),
    "QUAERO train": ("open-umls", ("quaero/corpus/train/EMEA", "quaero/corpus/train/MEDLINE"), "fr", None),
    "QUAERO dev": ("open-umls", ("quaero/corpus/dev/EMEA", "quaero/corpus/dev/MEDLINE"), "fr", None),
    "NCBI-disease dev": ("ctd-medic", ("ncbi_disease/NCBIdevelopset_corpus.txt",), "en", None),
    "BC5CDR-Disease dev": ("ctd-medic", ("bc5cdr/CDR_DevelopmentSet.PubTator.txt",), "en", ("Disease",)),
}
#: Link floors to choose from, at or above the `PROPOSAL_FLOOR` proposals are gathered at.
FLOORS = (0.80, 0.85, 0.90, 0.94)
PROBABILITIES = tuple(round(0.05 * step, 2) for step in range(1, 19))
POLICIES = ("longest", "best")
TODAY = 0.98  # the link threshold before calibration (`LinkParams.link_threshold`)


@dataclass
class Examples:
    """Candidate feature rows with labels, the language and the group (query or span) of each."""

    features: list[np.ndarray]
    labels: list[np.ndarray]
    langs: list[str]

    def arrays(self, keep) -> tuple[np.ndarray, np.ndarray]:
        chosen = [index for index, lang in enumerate(self.langs) if keep(lang)]
        return (np.concatenate([self.features[i] for i in chosen]), np.concatenate([self.labels[i] for i in chosen]))


def _raw_queries(data: Path):
    """(set, language, mention, gold ids) of every annotated mention, in-KB or not."""
    for lang in ("en", "es", "de", "zh", "ja"):
        for query in read_xlbel(data / "bench" / "xl_bel" / "xlbel_v0.0" / f"{lang}_1k_test_query.txt"):
            yield "XL-BEL", lang, query.mention, query.gold_ids
    for corpus, (_, _, lang, types) in CORPORA.items():
        for document in _documents(data, corpus):
            for annotation in document.annotations:
                if annotation.concept_ids and (types is None or annotation.type in types):
                    yield corpus, lang, annotation.text, annotation.concept_ids


def _documents(data: Path, corpus: str, spec: tuple | None = None):
    """The documents of `corpus` as `CORPORA` (or `spec`, a tuple of the same form) describes it."""
    _, paths, lang, types = spec or CORPORA[corpus]
    found = []
    for path in paths:
        for document in read_documents(data / "bench" / path):
            kept = tuple(a for a in document.annotations if types is None or a.type in types)
            found.append(replace(document, id=f"{path}/{document.id}", annotations=kept, lang=lang))
    return found


def _normalize_examples(linkers: dict, data: Path) -> tuple[Examples, dict]:
    """Feature rows of every mention's candidates; per set, each query's top probability input."""
    examples = Examples([], [], [])
    tops: dict[str, list[tuple[np.ndarray, bool, bool]]] = {}
    queries = list(_raw_queries(data))
    for kb_name, linker in linkers.items():
        mine = [q for q in queries if (CORPORA[q[0]][0] if q[0] in CORPORA else "open-umls") == kb_name]
        resolve = augment.gold_resolver(linker.bundle.kb)  # MEDIC gold is written MESH:…/OMIM:…
        found = normalize_rows(linker, [(mention, gold, None) for _, _, mention, gold in mine])
        for (_, lang, _, gold), rows in zip(mine, found):
            if rows is None:
                continue
            features, labels = rows
            examples.features.append(features)
            examples.labels.append(labels)
            examples.langs.append(lang)
            in_kb = any(resolve(concept) is not None for concept in gold)
            tops.setdefault(lang, []).append((features[0], bool(labels[0]), in_kb))
    return examples, tops


def _link_examples(linkers: dict, plain: dict, data: Path) -> dict:
    """Per corpus: documents, gold, the proposals with and without translation, and their features."""
    corpora = {}
    for corpus, (kb_name, _, lang, _) in CORPORA.items():
        documents = _documents(data, corpus)
        linker = linkers[kb_name]
        gold = in_kb_gold(documents, augment.gold_resolver(linker.bundle.kb))
        started = time.perf_counter()
        proposals = link_proposals(linker, documents)
        seconds = time.perf_counter() - started
        untranslated = link_proposals(plain[kb_name], documents) if plain[kb_name] is not linker else proposals
        rows = link_rows(linker, documents, proposals)
        features, labels = [features for features, _ in rows], [labels for _, labels in rows]
        types = concept_types(linker.bundle.kb)
        modifier = [is_modifier(p.candidates[0].concept_id, types, linker.link_params.modifier_types)
                    for found in proposals for p in found]
        corpora[corpus] = {"lang": lang, "documents": documents, "gold": gold, "proposals": proposals,
                           "untranslated": untranslated, "features": features, "labels": labels,
                           "modifier": modifier, "docs_per_s": len(documents) / seconds}
    return corpora


def _without_modifiers(corpora: dict) -> dict:
    """The corpora as `link` sees them: proposals whose best concept is a modifier left out."""
    views = {}
    for corpus, c in corpora.items():
        flags = iter(c["modifier"])
        proposals = [[p for p in found if not next(flags)] for found in c["proposals"]]
        kept = [index for index, modifier in enumerate(c["modifier"]) if not modifier]
        views[corpus] = {**c, "proposals": proposals, "features": [c["features"][i] for i in kept],
                         "labels": [c["labels"][i] for i in kept], "modifier": [False] * len(kept)}
    return views


def _linked(corpus: dict, keep, policy: str) -> dict:
    """Strict and partial scores of the proposals `keep(proposal, features) -> score | None` accepts."""
    predicted, position = [], 0
    for document, found in zip(corpus["documents"], corpus["proposals"]):
        kept = []
        for proposal in found:
            score = keep(proposal, position)
            position += 1
            if score is not None:
                kept.append(_Scored(proposal.start, proposal.end, score, proposal.candidates[0].concept_id))
        predicted += [(document.id, m.start, m.end, m.concept) for m in resolve_overlaps(kept, policy)]
    gold = [(doc_id, start, end, ids) for (doc_id, start, end), ids in corpus["gold"].items()]
    return span_scores(predicted, gold)


@dataclass(frozen=True)
class _Scored:
    start: int
    end: int
    score: float
    concept: str


def _cosine_rule(corpus: dict, threshold: float, key: str = "proposals") -> dict:
    view = {**corpus, "proposals": corpus[key]}
    return _linked(view, lambda p, _: p.candidates[0].score if p.candidates[0].score >= threshold else None,
                   "longest")


def _calibrated_rule(corpus: dict, model: Model, floor: float, minimum: float, policy: str) -> dict:
    tops = np.asarray([rows[0] for rows in corpus["features"]]).reshape(-1, len(FEATURES))
    probabilities = model.probabilities(tops) if len(tops) else np.zeros(0)

    def keep(proposal, position):
        p = probabilities[position]
        return p if proposal.candidates[0].score >= floor and p >= minimum else None
    return _linked(corpus, keep, policy)


def _fit_link(corpora: dict, keep_lang) -> Model:
    features = [rows for c in corpora.values() if keep_lang(c["lang"]) for rows in c["features"]]
    labels = [labels for c in corpora.values() if keep_lang(c["lang"]) for labels in c["labels"]]
    return Model.fit(np.concatenate(features), np.concatenate(labels))


def _choose(corpora: dict, model: Model, langs) -> tuple[tuple, float]:
    """The (floor, minimum probability, policy) with the best mean strict F1 over `langs`
    (each language the mean of its corpora)."""
    best, best_f1 = None, -1.0
    for floor in FLOORS:
        for minimum in PROBABILITIES:
            for policy in POLICIES:
                per_lang = {}
                for c in corpora.values():
                    if c["lang"] in langs:
                        f1 = _calibrated_rule(c, model, floor, minimum, policy)["strict"]["f1"]
                        per_lang.setdefault(c["lang"], []).append(f1)
                mean = float(np.mean([np.mean(v) for v in per_lang.values()]))
                if mean > best_f1:
                    best, best_f1 = (floor, minimum, policy), mean
    return best, best_f1


def _reliability(probabilities: np.ndarray, correct: np.ndarray, bins: int = 10) -> tuple[list, float]:
    """(bin, mean predicted, observed accuracy, count) per probability bin, and the ECE."""
    rows, ece = [], 0.0
    edges = np.linspace(0, 1, bins + 1)
    for low, high in itertools.pairwise(edges):
        inside = (probabilities >= low) & ((probabilities < high) | (high == 1.0))
        if inside.any():
            predicted, observed = probabilities[inside].mean(), correct[inside].mean()
            rows.append((f"{low:.1f}–{high:.1f}", predicted, observed, int(inside.sum())))
            ece += inside.sum() / len(probabilities) * abs(predicted - observed)
    return rows, ece


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lexicons", nargs="+", help="lexicon files or directories (default: the shared MUSE ones)")
    parser.add_argument("--write-default", action="store_true", help="write babelink/retrieve/calibration.json")
    parser.add_argument("--encoder", default="default", help="a packaged trained encoder (default: the bundled e5)")
    args = arguments(parser.description, parser)
    specs = args.lexicons or [str(args.data / "translations" / "muse")]
    started = time.perf_counter()
    encoded = {} if args.encoder == "default" else {"encoder": args.encoder}
    umls = load_bundle(cached_bundle(args.data, "open-umls", types="hpo", **encoded))
    medic = load_bundle(cached_bundle(args.data, "ctd-medic", **encoded))
    encoder = "bundled multilingual-e5-small" if args.encoder == "default" else args.encoder
    translated = replace(umls, lexicon=read_lexicons(specs))
    linkers = {"open-umls": Linker(translated, calibrated=False), "ctd-medic": Linker(medic, calibrated=False)}
    plain = {"open-umls": Linker(umls, calibrated=False), "ctd-medic": linkers["ctd-medic"]}

    normalize, tops = _normalize_examples(linkers, args.data)
    with_modifiers = _link_examples(linkers, plain, args.data)
    corpora = _without_modifiers(with_modifiers)
    norm_langs = sorted(set(normalize.langs))
    link_langs = sorted({c["lang"] for c in corpora.values()})

    lines = [(f"## {time.strftime('%Y-%m-%d')} — calibrated link decisions, leave-one-language-out "
             f"(commit `{commit()}`)"), "",
             (f"Command: `python benchmarks/calibrate.py{' --write-default' if args.write_default else ''}"
              f"{'' if args.encoder == 'default' else ' --encoder ' + args.encoder}` · "
              f"lexicons on open-umls: `{' '.join(map(shared_path, specs))}` · bundles: default open-umls and CTD "
              f"MEDIC hybrid, encoder: {encoder} · machine: {machine()}"), "",
             (f"Examples: `normalize` {sum(len(f) for f in normalize.features):,} candidates of "
              f"{len(normalize.features):,} mentions (XL-BEL v0.0 every query, Mantra, QUAERO train + dev, NCBI and "
              f"BC5CDR dev; out-of-KB mentions are NIL examples); `link` "
              f"{sum(len(f) for c in corpora.values() for f in c['features']):,} candidates of "
              f"{sum(len(c['features']) for c in corpora.values()):,} spans proposed above cosine "
              f"{PROPOSAL_FLOOR} ({sum(sum(c['modifier']) for c in with_modifiers.values()):,} of them topped by a "
              "clinical modifier: left out of the `link` model's examples). Each left-out language's models, floor, "
              "minimum probability and overlap policy come from the other languages only."), ""]

    lines += ["### `normalize`: calibration of the top candidate, and the NIL decision", "",
              ("| left out | mentions | in KB | Acc@1 | ECE | NIL at p ≥ 0.5: precision / recall of answers | "
              "at p ≥ 0.3 | at p ≥ 0.7 |"), "|---|---:|---:|---:|---:|---|---|---|"]
    reliability_rows = []
    for lang in norm_langs:
        model = Model.fit(*normalize.arrays(lambda other, lang=lang: other != lang))
        rows = np.asarray([row for row, _, _ in tops[lang]])
        correct = np.asarray([right for _, right, _ in tops[lang]], dtype=float)
        in_kb = np.asarray([known for _, _, known in tops[lang]], dtype=bool)
        probabilities = model.probabilities(rows)
        bins, ece = _reliability(probabilities, correct)
        reliability_rows += [(lang, *row) for row in bins]
        nil = []
        for threshold in (0.5, 0.3, 0.7):
            answered = probabilities >= threshold
            precision = correct[answered].mean() if answered.any() else 0.0
            recall = (correct * answered)[in_kb].sum() / max(1, in_kb.sum())
            nil.append(f"{precision:.3f} / {recall:.3f}")
        lines.append(f"| {lang} | {len(rows):,} | {int(in_kb.sum()):,} | {correct[in_kb].mean():.3f} | {ece:.3f} | "
                     + " | ".join(nil) + " |")
    lines += ["", ("Reliability of the left-out language (predicted probability against observed accuracy of the top "
              "candidate):"), "", "| lang | bin | mean predicted | observed | mentions |", "|---|---|---:|---:|---:|"]
    lines += [f"| {lang} | {name} | {predicted:.3f} | {observed:.3f} | {count:,} |"
              for lang, name, predicted, observed, count in reliability_rows]

    lines += ["", "### `link`: end-to-end strict / partial F1 of the left-out language", "",
              ("Each decision from the same proposals: today's (no translation, modifiers linked), the cosine rule "
               "and the calibrated decision with translation, each with modifiers linked and left out (`link`'s "
               "default: the cosine rule, modifiers left out)."), "",
              "| corpus | lang | gold | decision | strict P / R | strict F1 | partial F1 | floor / p / policy |",
              "|---|---|---:|---|---|---:|---:|---|"]
    for lang in link_langs:
        others = [other for other in link_langs if other != lang]
        decided: dict[str, list[tuple[str, dict, str]]] = {}
        for view, modifiers in ((with_modifiers, "modifiers linked"), (corpora, "modifiers left out")):
            model = _fit_link(view, lambda code, lang=lang: code != lang)
            choice, _ = _choose(view, model, others)
            for corpus, c in view.items():
                if c["lang"] == lang:
                    decided.setdefault(corpus, []).extend([
                        (f"cosine ≥ {TODAY} with translation, {modifiers}", _cosine_rule(c, TODAY), ""),
                        (f"calibrated with translation, {modifiers}", _calibrated_rule(c, model, *choice),
                         " / ".join(map(str, choice)))])
        for corpus, rows in decided.items():
            c = corpora[corpus]
            rows.insert(0, (f"today: cosine ≥ {TODAY}, no translation, modifiers linked",
                            _cosine_rule(with_modifiers[corpus], TODAY, "untranslated"), ""))
            lines += [f"| {corpus} | {lang} | {len(c['gold']):,} | {decision} | {scores['strict']['precision']:.3f} / "
                      f"{scores['strict']['recall']:.3f} | {scores['strict']['f1']:.3f} | "
                      f"{scores['partial']['f1']:.3f} | {choice} |" for decision, scores, choice in rows]

    normalize_model = Model.fit(*normalize.arrays(lambda _: True))
    link_model = _fit_link(corpora, lambda _: True)
    (floor, minimum, policy), mean_f1 = _choose(corpora, link_model, link_langs)
    lines += ["", (f"Fitted on every language: link floor {floor}, minimum probability {minimum}, overlap policy "
                   f"`{policy}` (mean dev strict F1 over languages {mean_f1:.3f}). Link proposals per second of the "
                   "translated linker (documents/s): " + ", ".join(f"{corpus} {c['docs_per_s']:.1f}"
                                                                 for corpus, c in corpora.items()) + "."),
              "", f"Run time {time.perf_counter() - started:.0f} s.", ""]
    if args.write_default:
        trained_on = {"sets": ["XL-BEL v0.0", *CORPORA], "languages": sorted(set(norm_langs) | set(link_langs)),
                      "encoder": encoder, "commit": commit(),
                      **({} if args.encoder == "default"
                         else {"artefact_sha256": sha256_file(packaged()[args.encoder])})}
        Calibrator({"normalize": normalize_model, "link": link_model}, trained_on).save(
            ROOT / "babelink" / "retrieve" / CALIBRATION_FILE if args.encoder == "default"
            else packaged()[args.encoder].with_name(f"{args.encoder}{SHIPPED_SUFFIX}"))  # where `shipped` looks
    publish("\n".join(lines), not args.no_write, "calibration")


if __name__ == "__main__":
    main()
