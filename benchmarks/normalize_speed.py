"""`normalize` throughput with the default hybrid bundle, and a profile of where the time goes.

    python benchmarks/normalize_speed.py [--data ../shared/data] [--no-write]

Workload: the 5,000 XL-BEL v0.0 mentions (en, es, de, zh, ja) against the open-umls default
bundle, top-5, through `Linker.normalize` (the CLI's path). Baseline in the same run: the same
linker with the encoder in fp32. Then the default repeated over the same mentions (a corpus's
repeats are served by the encoder cache), the default with the shared MUSE translation lexicons
attached (what `build --translations` stores) and the same with every mention rendered (no
`CONFIDENT_SCORE` skip), and a cProfile breakdown of the default. The bundle is the typed open-umls
bundle the calibration benchmark shares (types do not change `normalize`).
"""

from __future__ import annotations

import cProfile
import pstats
import time

import torch
from report import arguments, cached_bundle, commit, machine, publish

from babelink.bundle.store import load_bundle
from babelink.checkpoint import cpu_has_native_bf16
from babelink.encoders import encoder_from_manifest
from babelink.eval import benchmark
from babelink.formats.xlbel import read_xlbel
from babelink.linker import Linker
from babelink.retrieve.generators import HybridGenerator, HybridParams
from babelink.retrieve.translation import CONFIDENT_SCORE, TranslatingGenerator
from babelink.translate import Renderer, english_words, read_lexicons

#: The translation lexicons of the `hybrid + translations` row, under the shared data.
LEXICONS = "translations/muse"

#: Profile rows: label → (file name, function) pairs; each pair counts the largest cumulative time
#: among matching entries (nested `forward`s of one model file share a name), pairs are summed.
STAGES = {
    "encoder, all (tokenise, pad, forward, pool)": (("transformer.py", "encode"),),
    "encoder: transformer forward": (("modeling_bert.py", "forward"),),
    "sparse: TF-IDF transform + shortlist + rescoring": (("sparse.py", "transform"), ("sparse.py", "search_vectors")),
    "dense: FAISS search": (("dense.py", "search"),),
    "fusion: both scores for the union of shortlists": (("sparse.py", "score_pairs"), ("dense.py", "score_pairs")),
    "aggregation per concept": (("generators.py", "concepts"),),
    "text normalisation": (("text.py", "normalize_name"),),
}


def _linker(bundle, precision: str | None, lexicon=None, confident: float = CONFIDENT_SCORE) -> Linker:
    entry = dict(bundle.manifest["dense"]["encoder"])
    if precision:
        entry["precision"] = precision
    encoder = bundle.query_encoder(encoder_from_manifest(entry, bundle.path))
    generator = HybridGenerator(bundle.kb, bundle.names, bundle.sparse, bundle.dense, encoder, HybridParams())
    if lexicon is not None:
        generator = TranslatingGenerator(generator, Renderer(lexicon, english_words(bundle.kb)), bundle.names,
                                         confident)
    return Linker(bundle, generator)


def _rate(linker: Linker, mentions: list[str], repeats: int = 1) -> float:
    linker.normalize(["warm-up"])
    started = time.perf_counter()
    for _ in range(repeats):
        linker.normalize(mentions, top_k=5)
    return repeats * len(mentions) / (time.perf_counter() - started)


def _profile(linker: Linker, mentions: list[str]) -> tuple[float, dict[str, float]]:
    profiler = cProfile.Profile()
    started = time.perf_counter()
    profiler.runcall(linker.normalize, mentions, top_k=5)
    total = time.perf_counter() - started
    stats = pstats.Stats(profiler).stats  # (file, line, function) -> (calls, …, cumulative s, callers)
    stages = {}
    for label, pairs in STAGES.items():
        found = [[row[3] for (file, _, function), row in stats.items() if file.endswith(name) and function == wanted]
                 for name, wanted in pairs]
        if missing := [f"{name}:{wanted}" for (name, wanted), rows in zip(pairs, found) if not rows]:
            # a renamed function would otherwise read as a stage that costs nothing
            raise SystemExit(f"profile stage {label!r}: no call of {', '.join(missing)}; update STAGES")
        stages[label] = sum(max(rows) for rows in found)
    return total, stages


def main() -> None:
    args = arguments(__doc__.splitlines()[0])
    bundle = load_bundle(cached_bundle(args.data, "open-umls", types="hpo"))
    stream = [q.mention for lang in benchmark.XLBEL_LANGUAGES
              for q in read_xlbel(args.data / "bench" / "xl_bel" / "xlbel_v0.0" / f"{lang}_1k_test_query.txt")]
    baseline = _rate(_linker(bundle, "fp32"), stream)
    default = _linker(bundle, None)
    default_rate = _rate(default, stream)
    warm_rate = _rate(default, stream, repeats=2)  # every mention already in the cache
    lexicon = read_lexicons([args.data / LEXICONS])
    translated_rate = _rate(_linker(bundle, None, lexicon), stream)
    rendered_rate = _rate(_linker(bundle, None, lexicon, confident=float("inf")), stream)
    total, stages = _profile(_linker(bundle, None), stream)
    lines = [
        f"## {time.strftime('%Y-%m-%d')} — normalize speed, default hybrid (commit `{commit()}`)",
        "",
        (
            f"Command: `python benchmarks/normalize_speed.py` · machine: {machine()} · torch "
            f"{torch.__version__}, {torch.get_num_threads()} threads"
        ),
        "",
        (
            f"{len(stream):,} XL-BEL v0.0 mentions (all of them, in-KB or not; {len(set(stream)):,} distinct), "
            "open-umls default bundle "
            f"({bundle.manifest['kb']['strings']:,} name strings, "
            f"{bundle.manifest['dense']['index']['kind']} index), top-5:"
        ),
        "",
        "| setting | mentions/s | × baseline |",
        "|---|---:|---:|",
        f"| hybrid, encoder fp32 (baseline) | {baseline:,.0f} | 1.00 |",
        (
            f"| hybrid, default ({'bf16 autocast' if cpu_has_native_bf16() else 'fp32'} on this CPU, "
            f"length-sorted batches) | {default_rate:,.0f} | "
            f"{default_rate / baseline:.2f} |"
        ),
        f"| hybrid, default, mentions seen before (encoder cache) | {warm_rate:,.0f} | {warm_rate / baseline:.2f} |",
        (f"| hybrid + translations (MUSE lexicons, language guessed) | {translated_rate:,.0f} | "
         f"{translated_rate / baseline:.2f} |"),
        (f"| hybrid + translations, every mention rendered (no skip above {CONFIDENT_SCORE}) | "
         f"{rendered_rate:,.0f} | {rendered_rate / baseline:.2f} |"),
        "",
        f"Profile of the default over the same stream ({total:.2f} s under cProfile):",
        "",
        "| stage | s | share |",
        "|---|---:|---:|",
    ]
    for label, seconds in stages.items():
        lines.append(f"| {label} | {seconds:.2f} | {seconds / total:.0%} |")
    publish("\n".join(lines) + "\n", not args.no_write, "speed")


if __name__ == "__main__":
    main()
