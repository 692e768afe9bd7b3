"""Lexicon lookups in the languages without annotated data: held-out words and one-line sentences.

    python benchmarks/lexicon_lookups.py [--data ../shared/data] [--no-write]

babelink is measured on languages it has no benchmark for; the MUSE lexicons cover fifteen, of
which XL-BEL, Mantra and QUAERO test six. Two measurements reach the others:

- **held-out words**: of each lexicon's single words (2 characters or more), 5% (at most 2,000, seed
  0) are taken out, and each is looked up through the rest of its lexicon as a mention's word would
  be (`Renderer.words`: exact entry, proclitics, inflection backoff, compound). Reported: how many
  get a rendering, and how many of those renderings are right (the first sense is one of the
  word's own senses, up to an English ending of 3 letters: "disease" for "diseases"). Baseline,
  same run: the lookup before proclitics and letter-counted stems (stems of `min_stem` characters
  in every script, no proclitics).
- **one-line clinical sentences** written for this benchmark, two per language (the issue's
  Russian example among them), linked on the open-umls bundle with the MUSE lexicons, the language
  given and guessed, against the same bundle without lexicons (which cannot link a script its
  KB has no names in). Reported per language: expected concepts found, and mentions linked to
  other concepts.
"""

from __future__ import annotations

import random
import time
from dataclasses import replace

from report import arguments, cached_bundle, commit, machine, publish

from babelink.bundle.store import load_bundle
from babelink.linker import Linker
from babelink.translate import read_lexicons
from babelink.translate.lexicon import Lexicon
from babelink.translate.render import Renderer, RenderParams, _Vocabulary

MUSE = "translations/muse"
HELD_OUT_SHARE, MAX_HELD_OUT = 0.05, 2000
DIABETES, ASTHMA, HYPERTENSION, PNEUMONIA = "C0011849", "C0004096", "C0020538", "C0032285"
SENTENCES = {
    "ru": [("У пациента сахарный диабет и бронхиальная астма.", {DIABETES, ASTHMA}),
           ("Пациентка госпитализирована с пневмонией и артериальной гипертензией.", {PNEUMONIA, HYPERTENSION})],
    "he": [("המטופל סובל מסוכרת ואסתמה.", {DIABETES, ASTHMA}),
           ("המטופלת אושפזה עם דלקת ריאות ויתר לחץ דם.", {PNEUMONIA, HYPERTENSION})],
    "ko": [("환자는 당뇨병과 천식이 있다.", {DIABETES, ASTHMA}),
           ("환자는 폐렴과 고혈압으로 입원했다.", {PNEUMONIA, HYPERTENSION})],
    "ar": [("يعاني المريض من السكري والربو.", {DIABETES, ASTHMA}),
           ("دخل المريض المستشفى بسبب الالتهاب الرئوي وارتفاع ضغط الدم.", {PNEUMONIA, HYPERTENSION})],
    "tr": [("Hastada diyabet ve astım var.", {DIABETES, ASTHMA}),
           ("Hasta zatürre ve hipertansiyon nedeniyle yatırıldı.", {PNEUMONIA, HYPERTENSION})],
    "fi": [("Potilaalla on diabetes ja astma.", {DIABETES, ASTHMA}),
           ("Potilas joutui sairaalaan keuhkokuumeen ja verenpainetaudin vuoksi.", {PNEUMONIA, HYPERTENSION})],
    "th": [("ผู้ป่วยเป็นโรคเบาหวานและโรคหอบหืด", {DIABETES, ASTHMA}),
           ("ผู้ป่วยเข้าโรงพยาบาลด้วยโรคปอดบวมและความดันโลหิตสูง", {PNEUMONIA, HYPERTENSION})],
}


class PreviousLookup(Renderer):
    """The lookup before proclitics and letter-counted stems: the baseline of the held-out words."""

    def _without_proclitics(self, token: str, lang: str) -> None:
        return None

    def _min_stem(self, token: str) -> int:
        return self.params.min_stem

    def _vocabulary(self, lang: str) -> _Vocabulary:
        if lang not in self._vocabularies:
            scaled = _Vocabulary.of(self.lexicon.entries(lang), self.params.min_stem)
            self._vocabularies[lang] = replace(scaled, min_stem=self.params.min_stem, _attested={})
        return self._vocabularies[lang]


def same_word(rendered: str, sense: str) -> bool:
    """Equal, or equal up to an ending of at most 3 letters on each side after 4 shared ones."""
    shared = next((i for i, (a, b) in enumerate(zip(rendered, sense)) if a != b), min(len(rendered), len(sense)))
    return rendered == sense or (shared >= 4 and len(rendered) - shared <= 3 and len(sense) - shared <= 3)


def held_out_lookups(lexicon: Lexicon, lang: str) -> dict:
    entries = lexicon.entries(lang)
    words = sorted(word for word in entries if " " not in word and len(word) >= 2)
    held = sorted(random.Random(0).sample(words, min(MAX_HELD_OUT, int(len(words) * HELD_OUT_SHARE))))
    held_set = set(held)
    rest = Lexicon({lang: {word: senses for word, senses in entries.items() if word not in held_set}})
    counts = {}
    for label, renderer in (("previous", PreviousLookup(rest, (), RenderParams())), ("current", Renderer(rest, ()))):
        rendered = right = 0
        for word in held:
            found = renderer.words(word, lang)
            if len(found) == 1 and found[0].found and found[0].translated:
                rendered += 1
                right += any(same_word(found[0].senses[0], sense) for sense in entries[word])
        counts[label] = (rendered, right)
    return {"words": len(words), "held": len(held), **counts}


def sentence_outcomes(linker: Linker, lang: str, given: bool) -> tuple[int, int, int]:
    """(expected concepts found, expected in all, mentions linked to other concepts)."""
    found = expected_total = wrong = 0
    for text, expected in SENTENCES[lang]:
        linked = {mention.candidates[0].concept_id for mention in linker.link(text, lang if given else None).mentions}
        found += len(linked & expected)
        expected_total += len(expected)
        wrong += len(linked - expected)
    return found, expected_total, wrong


def main() -> None:
    args = arguments(__doc__.splitlines()[0])
    lexicon = read_lexicons([args.data / MUSE])
    started = time.perf_counter()
    lookups = {lang: held_out_lookups(lexicon, lang) for lang in lexicon.languages}
    lookup_seconds = time.perf_counter() - started
    bundle = load_bundle(cached_bundle(args.data, "open-umls", types="hpo"))
    plain = Linker(bundle)
    translating = Linker(replace(bundle, lexicon=lexicon), encoder=plain.encoder)
    lines = [
        f"## {time.strftime('%Y-%m-%d')} — lexicon lookups in languages without annotated data (commit `{commit()}`)",
        "",
        f"Command: `python benchmarks/lexicon_lookups.py` · machine: {machine()}",
        "",
        (f"Held-out words of the MUSE lexicons (`{MUSE}`), looked up through the rest of their lexicon "
        f"({lookup_seconds:.0f} s for both rules); right: the first sense is one of the word's own, up to an "
        "English ending:"),
        "",
        ("| language | single words | held out | previous lookup: rendered | right | precision | "
        "lookup: rendered | right | precision |"),
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for lang, row in lookups.items():
        cells = [f"{rendered:,} | {right:,} | {right / rendered:.2f}" if rendered else "0 | 0 | –"
                 for rendered, right in (row["previous"], row["current"])]
        lines.append(f"| {lang} | {row['words']:,} | {row['held']:,} | {cells[0]} | {cells[1]} |")
    lines += [
        "",
        (f"One-line clinical sentences (two per language, {len(SENTENCES) * 2} in all), linked on the open-umls "
        "bundle typed by HPO with the default link parameters; cells: expected concepts found / expected, "
        "and mentions linked to other concepts:"),
        "",
        "| language | no lexicons (baseline) | MUSE lexicons, language given | MUSE lexicons, language guessed |",
        "|---|---|---|---|",
    ]
    for lang in SENTENCES:
        cells = [sentence_outcomes(linker, lang, given)
                 for linker, given in ((plain, True), (translating, True), (translating, False))]
        lines.append(f"| {lang} | " + " | ".join(f"{found}/{total}, {wrong} other" for found, total, wrong in cells)
                     + " |")
    publish("\n".join(lines) + "\n", not args.no_write, "normalization")


if __name__ == "__main__":
    main()
