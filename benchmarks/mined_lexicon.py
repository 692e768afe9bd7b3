"""The KB-mined lexicon against the MUSE dictionaries: how often a mined word's first sense is right.

    python benchmarks/mined_lexicon.py [--data ../shared/data] [--no-write]

`build --translations-from-kb` and the embedded default render foreign mentions through a lexicon
mined from the KB's own names (`translate.mining`). The MUSE dictionaries are a gold standard for
the mined words they also list: a first sense is right when it is one of MUSE's English words for
that word, up to an English ending (`lexicon_lookups.same_word`). MUSE is general-domain and misses
medical senses ("rotule": MUSE says "kneecap", the KB "patella"), so the share is a lower bound, to
compare between the systems of one run: mining by association alone (the baseline,
`MiningParams(cognate_prefix=0)`) and with cognate evidence (the default). KBs: open-umls, and the
embedded default's vocabularies (PyPI packages).
"""

from __future__ import annotations

import time

from lexicon_lookups import MUSE, same_word
from report import KB_FILES, arguments, commit, machine, publish

from babelink.kb.default import build_default_kb
from babelink.kb.readers import read_kb
from babelink.translate import read_lexicons
from babelink.translate.lexicon import Lexicon
from babelink.translate.mining import MiningParams, mine_lexicon

SYSTEMS = {"association only (baseline)": MiningParams(cognate_prefix=0), "with cognates (default)": MiningParams()}


def judged(mined: Lexicon, muse: Lexicon, lang: str) -> tuple[int, int, int]:
    """(single-word entries, those MUSE lists, those whose first sense MUSE gives)."""
    gold = muse.entries(lang)
    words = [(word, senses) for word, senses in mined.entries(lang).items() if " " not in word]
    listed = [(senses[0], gold[word]) for word, senses in words if word in gold]
    right = sum(any(same_word(first, sense) for sense in senses) for first, senses in listed)
    return len(words), len(listed), right


def main() -> None:
    args = arguments(__doc__.splitlines()[0])
    muse = read_lexicons([args.data / MUSE])
    kbs = {"open-umls": lambda: read_kb(args.data / KB_FILES["open-umls"]), "embedded default": build_default_kb}
    header = " | ".join(f"{system}: words | in MUSE | first sense right" for system in SYSTEMS)
    lines = [
        f"## {time.strftime('%Y-%m-%d')} — the KB-mined lexicon against the MUSE dictionaries (commit `{commit()}`)",
        "",
        f"Command: `python benchmarks/mined_lexicon.py` · machine: {machine()}",
        "",
        ("Single-word entries of the lexicon each system mines from the KB's names, those MUSE "
         f"(`{MUSE}`) lists, and the share of those whose first sense is one of MUSE's; the mining's seconds "
         "per KB in the last row:"),
        "",
        f"| KB | language | {header} |",
        "|---|---|" + "---:|---:|---:|" * len(SYSTEMS),
    ]
    for kb_name, read in kbs.items():
        kb = read()
        seconds, lexicons = {}, {}
        for system, params in SYSTEMS.items():
            started = time.perf_counter()
            lexicons[system] = mine_lexicon(kb, params)
            seconds[system] = time.perf_counter() - started
        for lang in sorted(set(lexicons["with cognates (default)"].languages) & set(muse.languages)):
            cells = []
            for lexicon in lexicons.values():
                words, listed, right = judged(lexicon, muse, lang)
                cells.append(f"{words:,} | {listed:,} | {right / listed:.3f}" if listed else f"{words:,} | 0 | –")
            lines.append(f"| {kb_name} | {lang} | " + " | ".join(cells) + " |")
        lines.append(f"| {kb_name} | mining s | " + " | ".join(f"{s:.0f} s | | " for s in seconds.values()) + " |")
    publish("\n".join(lines) + "\n", not args.no_write, "normalization")


if __name__ == "__main__":
    main()
