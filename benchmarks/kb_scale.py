"""Building and querying a KB of up to 2 million names on the CPU (issue 41's scale target).

    python benchmarks/kb_scale.py [--data ../shared/data] [--no-write] [--names 500000,1000000,2000000]

No open KB of that size is in the shared data, so the larger KBs are open-umls grown the way UMLS
grows: each round adds every open-umls row again under a new concept, its name worded as one of
UMLS's common variants ("History of X", "X NOS", "X (disorder)", …; `VARIANTS`), until the size is
reached. Their strings, scripts and lengths are real names' (13+ languages), their TF-IDF n-grams
mostly so. The baseline is open-umls itself, in the same run.

Each size runs as a user would: `babelink build --kb MRCONSO.RRF --index lazy` (the index that
encodes no name at build; a FAISS index would encode all 2M through the transformer, about 2 h at
this CPU's ~250 names/s) in its own process, timed with its peak RSS; the bundle's size on disk;
CLI start-up (`babelink normalize --bundle DIR fever`, median of 3); and `normalize` of 500
XL-BEL v0.0 mentions (100 per language) in a new process with an empty name store (cold: each
shortlisted name encoded on first need), then again in another process (warm: names stored,
mentions encoded anew). Rates exclude opening the bundle.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from report import arguments, commit, machine, publish, shared_path

#: UMLS-like wordings of a name, one per round after the first (which is open-umls as it is).
VARIANTS = ("History of {}", "Family history of {}", "{} NOS", "{} (disorder)", "Suspected {}", "{}, unspecified",
            "Acute {}", "Chronic {}", "Congenital {}", "{}, left side", "{}, right side", "Recurrent {}")
LANGUAGES = ("en", "es", "de", "zh", "ja")
MENTIONS_PER_LANGUAGE = 100
CUI, AUI, STRING = 0, 7, 14  # MRCONSO.RRF columns


def grown_kb(source: Path, names: int, out: Path) -> int:
    """Write `out` (MRCONSO.RRF) with `names` rows: `source`'s rows, then each round of `VARIANTS`
    over them under concepts and atoms of their own; returns the rows written."""
    rows = source.read_text(encoding="utf-8").splitlines()
    written = 0
    with open(out, "w", encoding="utf-8") as stream:
        for round_, wording in enumerate(("{}", *VARIANTS)):
            for row in rows[: names - written]:
                fields = row.split("|")
                if round_:
                    fields[CUI], fields[AUI] = f"{fields[CUI]}-{round_}", f"{fields[AUI]}-{round_}"
                    fields[STRING] = wording.format(fields[STRING])
                stream.write("|".join(fields) + "\n")
            written = min(names, written + len(rows))
            if written == names:
                return written
    return written


def timed(command: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """(seconds, peak RSS in MiB, stdout) of one child process, its own peak (`wait4`), not the
    largest of all children so far."""
    with tempfile.TemporaryFile("w+") as stdout, tempfile.TemporaryFile("w+") as stderr:
        started = time.perf_counter()
        process = subprocess.Popen(command, env=env, stdout=stdout, stderr=stderr, text=True)
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode:
            stderr.seek(0)
            sys.exit(f"{' '.join(command)} failed:\n{stderr.read()[-2000:]}")
        stdout.seek(0)
        return seconds, usage.ru_maxrss / 1024, stdout.read()


def mentions(data: Path) -> list[str]:
    from babelink.formats.xlbel import read_xlbel
    from babelink.text import normalize_name

    chosen = []
    for language in LANGUAGES:
        queries = read_xlbel(data / "bench" / "xl_bel" / "xlbel_v0.0" / f"{language}_1k_test_query.txt")
        chosen += [q.mention for q in queries if normalize_name(q.mention)][:MENTIONS_PER_LANGUAGE]
    return chosen


def normalize_step(bundle: str, mention_file: str) -> None:
    """Child process: open the bundle, normalise the mentions once, print seconds as JSON."""
    from babelink.linker import Linker

    queries = Path(mention_file).read_text(encoding="utf-8").splitlines()
    started = time.perf_counter()
    linker = Linker.open(bundle)
    opened = time.perf_counter()
    linker.normalize(queries, top_k=5)
    print(json.dumps({"open": opened - started, "normalize": time.perf_counter() - opened, "mentions": len(queries)}))


def measure(kb: Path, work: Path, mention_file: Path) -> dict[str, float]:
    bundle, home = work / "bundle", work / "home"
    env = {**os.environ, "BABELINK_HOME": str(home)}
    babelink = str(Path(sys.executable).with_name("babelink"))
    result = {}
    result["build_s"], result["build_rss_mb"], _ = timed(
        [babelink, "build", "--kb", str(kb), "--index", "lazy", "--out", str(bundle)], env)
    result["bundle_mb"] = sum(p.stat().st_size for p in bundle.rglob("*") if p.is_file()) / 2**20
    result["startup_s"] = statistics.median(
        timed([babelink, "normalize", "--bundle", str(bundle), "fever"], env)[0] for _ in range(3))
    for phase in ("cold", "warm"):
        _, rss, stdout = timed([sys.executable, __file__, "--normalize-step", str(bundle), str(mention_file)], env)
        step = json.loads(stdout.splitlines()[-1])
        result[f"{phase}_per_s"] = step["mentions"] / step["normalize"]
        result[f"{phase}_open_s"], result[f"{phase}_rss_mb"] = step["open"], rss
    return result


def main() -> None:
    if sys.argv[1:2] == ["--normalize-step"]:
        normalize_step(*sys.argv[2:4])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--names", default="500000,1000000,2000000", help="sizes of the grown KBs, comma-separated")
    args = arguments(parser.description, parser)
    source = args.data / "kb" / "open-umls" / "MRCONSO.RRF"
    sizes = [int(size) for size in args.names.split(",")]
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        mention_file = scratch / "mentions.txt"
        mention_file.write_text("\n".join(mentions(args.data)) + "\n", encoding="utf-8")
        rows = {}
        for size in [None, *sizes]:
            work = scratch / f"kb-{size or 'open-umls'}"
            work.mkdir()
            kb = source if size is None else work / "MRCONSO.RRF"
            count = len(source.read_text(encoding="utf-8").splitlines()) if size is None else grown_kb(source, size, kb)
            rows[count] = {"label": "open-umls (baseline)" if size is None else "grown open-umls",
                           **measure(kb, work, mention_file)}
            print(count, rows[count], flush=True)
    base = next(iter(rows.values()))
    lines = [
        f"## {time.strftime('%Y-%m-%d')} — a KB of up to {max(rows):,} names, built and queried (commit `{commit()}`)",
        "",
        (f"Command: `python benchmarks/kb_scale.py --names {args.names}` · machine: {machine()} · data: "
         f"`{shared_path(source)}` grown by UMLS-like variant wordings (script docstring), "
         f"{len(LANGUAGES) * MENTIONS_PER_LANGUAGE} XL-BEL v0.0 mentions"),
        "",
        "Lazy index (`babelink build --index lazy`), each step its own process; rates exclude opening the bundle:",
        "",
        ("| KB | names | build s | × baseline | build peak RSS MiB | bundle MiB | CLI start-up s | "
         "normalize cold /s | warm /s | query peak RSS MiB |"),
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {r['label']} | {names:,} | {r['build_s']:.1f} | {r['build_s'] / base['build_s']:.2f} | "
        f"{r['build_rss_mb']:,.0f} | {r['bundle_mb']:,.0f} | {r['startup_s']:.2f} | {r['cold_per_s']:.0f} | "
        f"{r['warm_per_s']:.0f} | {r['warm_rss_mb']:,.0f} |"
        for names, r in rows.items()
    ]
    publish("\n".join(lines) + "\n", not args.no_write, "speed")


if __name__ == "__main__":
    main()
