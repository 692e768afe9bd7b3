"""Regenerate BENCHMARKS.md, the results page, from the dated logs in `benchmarks/log/`.

The logs are the record: each benchmark script appends a section (`## <date> — <title> (commit
`<hash>`)`, a `Command:` line, tables, text) to its area's log. The page shows what babelink scores
today: for each headline in `HEADLINES`, the tables of the newest section its rule selects, with
the commit, command and a link to the section. Nothing on the page is typed by hand, so a stale
or edited page is caught by `--check`:

    python benchmarks/results_page.py            # rewrite BENCHMARKS.md
    python benchmarks/results_page.py --check    # exit 1 when BENCHMARKS.md differs from the logs
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

from babelink.fsutil import write_text_atomic

ROOT = Path(__file__).resolve().parents[1]
LOG_DIR = ROOT / "benchmarks" / "log"
PAGE = ROOT / "BENCHMARKS.md"

HEADING = re.compile(
    r"## (?P<date>\d{4}-\d{2}-\d{2}) — (?P<title>.+) \(commit `(?P<commit>[0-9a-f]{7,40}(\+dirty)?)`.*\)$"
)
COMMAND = re.compile(r"Command: `(?P<command>[^`]+)`")


@dataclass(frozen=True)
class Summary:
    """Which cells of a headline's tables make its row of the summary table: per value of the `key`
    column (or once, without one), the `metric` of the row whose `system` cell is each of
    `systems`, else of the first that starts with it, beside the same run's `baseline` row."""

    system: str
    metric: str
    systems: tuple[str, ...]
    baseline: str
    key: str | None = None
    key_prefix: str = ""  # only the `key` values that start so


@dataclass(frozen=True)
class Headline:
    """Which section and tables stand for one current result: the newest section of `area` whose
    command runs `script` with every option in `having` and none in `without`, and whose tables
    have a row for each of `rows` (a system: whichever options ran it); of it, the tables whose
    header row contains `columns`. A section without such a table is an error (a log the headline no
    longer reads), unless `optional`: a run that measured no such thing (a training run without a
    one-pass model) is passed over."""

    title: str
    area: str
    script: str
    columns: str
    having: tuple[str, ...] = ()
    without: tuple[str, ...] = ()
    rows: tuple[str, ...] = ()
    summary: Summary | None = None
    optional: bool = False


_NORMALIZATION = Summary("system", "Acc@1", ("hybrid + spans + abbreviations", "hybrid"), "sparse", key="set")
#: A trained encoder's rows beside the same system over the bundled encoder's bundle, the same run.
_TRAINED = Summary("system", "Acc@1", ("hybrid + translations", "hybrid"), "hybrid, bundled encoder", key="set")
_LINKING = Summary("system", "strict F1", ("hybrid + spans",), "sparse baseline", key="corpus")
_CALIBRATION = Summary("decision", "strict F1", ("cosine ≥ 0.98 with translation, modifiers left",), "today",
                       key="corpus")
HEADLINES = (
    Headline("Normalization, UMLS stand-in (open-umls), bundled encoder", "normalization", "normalization.py",
             "Acc@1", having=("--kb open-umls",), without=("--encoder", "--systems"), summary=_NORMALIZATION),
    Headline("Normalization, CTD MEDIC, bundled encoder", "normalization", "normalization.py", "Acc@1",
             having=("--kb ctd-medic",), without=("--encoder", "--systems"), summary=_NORMALIZATION),
    Headline("Normalization, UMLS stand-in (open-umls), newest trained encoder", "normalization",
             "normalization.py", "Acc@1", having=("--kb open-umls", "--encoder"),
             summary=_TRAINED),
    Headline("Normalization, CTD MEDIC, newest trained encoder", "normalization", "normalization.py", "Acc@1",
             having=("--kb ctd-medic", "--encoder"), summary=_TRAINED),
    Headline("Document linking, span enumeration", "end-to-end", "end_to_end.py", "strict F1",
             without=("--ner", "--encoder"), summary=_LINKING),
    Headline("Document linking, Mantra GSC (en, es, fr)", "end-to-end", "end_to_end.py", "strict F1",
             having=("mantra-es",), without=("--ner", "--encoder"), summary=replace(_LINKING, key_prefix="Mantra")),
    Headline("Document linking, a trained encoder beside the bundled one", "end-to-end", "end_to_end.py",
             "strict F1", having=("--encoder",),
             summary=Summary("system", "strict F1", ("hybrid + spans, encoder",), "hybrid + spans", key="corpus")),
    Headline("Embedded default: link with a semantic-group filter (`--types DISO`, `--types CHEM`)", "end-to-end",
             "default_groups.py", "strict P / R / F1",
             summary=Summary("system", "strict P / R / F1", ("`--types",), "no filter", key="set")),
    Headline("The embedded default's encoder: normalize, on the default itself", "normalization",
             "default_encoder.py", "Acc@5", summary=Summary("system", "Acc@1", ("e5-sap",), "bundled e5", key="set")),
    Headline("The embedded default's encoder: `link --types DISO`, threshold chosen on dev", "normalization",
             "default_encoder.py", "strict P / R / F1",
             summary=Summary("system", "strict P / R / F1", ("e5-sap",), "bundled e5", key="set")),
    Headline("The embedded default's link threshold, a language left out", "normalization", "default_encoder.py",
             "language left out"),
    Headline("Document linking, learned detector (transformer + CRF)", "end-to-end", "end_to_end.py", "strict F1",
             having=("--ner",), summary=replace(_LINKING, systems=("ner + hybrid + spans",))),
    Headline("Document linking, one-pass dual encoder (004)", "dual-encoder", "dual_encoder.py", "strict F1",
             having=("--medic-model",), without=("--ablation",)),
    Headline("Dual encoder: hard and random negatives against random ones only, equal steps (004 Tab. 3)",
             "dual-encoder", "dual_encoder.py", "strict F1", having=("--ablation",),
             summary=Summary("system", "strict F1", ("dual encoder",), "dual encoder, random negatives only",
                             key="corpus")),
    Headline("Dual encoder, leave-one-language-out on Mantra GSC", "dual-encoder", "dual_encoder.py",
             "language left out", having=("--mantra",)),
    Headline("Normalization with translation lexicons (open-umls, bundled encoder)", "normalization",
             "normalization.py", "Acc@1", having=("--kb open-umls",), without=("--encoder",),
             rows=("hybrid + translations", "hybrid + KB-mined translations"),
             summary=Summary("system", "Acc@1", ("hybrid + translations", "hybrid + KB-mined translations"),
                             "hybrid", key="set")),
    Headline("Lazy index: no name encoded at build", "normalization", "normalization.py", "Acc@1",
             having=("--kb open-umls",), without=("--encoder",), rows=("hybrid, lazy index",),
             summary=Summary("system", "Acc@1", ("hybrid, lazy index",), "hybrid", key="set")),
    Headline("Lazy index with the KB-mined lexicon: the embedded default's retrieval", "normalization",
             "normalization.py", "Acc@1", without=("--encoder",), rows=("hybrid + KB-mined translations, lazy index",),
             summary=Summary("system", "Acc@1", ("hybrid + KB-mined translations, lazy index",),
                             "hybrid + KB-mined translations", key="set")),
    Headline("Translation lexicons in languages without annotated data", "normalization", "lexicon_lookups.py",
             "language"),
    Headline("The KB-mined lexicon against the MUSE dictionaries", "normalization", "mined_lexicon.py", "language"),
    Headline("KB names of a held-out language (open-umls, bundled encoder)", "normalization", "held_out_names.py",
             "language", without=("--encoder",),
             summary=Summary("system", "mean Acc@1", ("hybrid + translations",), "hybrid", key="languages")),
    Headline("Calibrated link decisions and translation, leave-one-language-out", "calibration", "calibrate.py",
             "decision", without=("--encoder",), summary=_CALIBRATION),
    Headline("Calibrated link decisions, a trained encoder's own calibrator (`--encoder`)", "calibration",
             "calibrate.py", "decision", having=("--encoder",), summary=_CALIBRATION),
    Headline("SAP-trained encoders, XL-BEL and Mantra GSC", "sap-training", "sap_training.py", "mean Acc@1"),
    Headline("Encoders trained by the training job: every model on every set, per language", "training",
             "gpu_job.py", "left out by"),
    Headline("One-pass model trained by the training job, end to end", "training", "gpu_job.py", "strict F1",
             optional=True),
    Headline("Normalize speed", "speed", "normalize_speed.py", "mentions/s",
             summary=Summary("setting", "mentions/s", ("hybrid, default (",), "hybrid, encoder fp32")),
    Headline("First run on a fresh machine and CLI start-up", "speed", "first_run.py", "seconds",
             summary=Summary("start-up", "seconds", ('babelink normalize "fever"',), "the same from a file")),
    Headline("Batch throughput", "speed", "batch_throughput.py", "documents/s"),
    Headline("Link speed, embedded default", "speed", "link_speed.py", "documents/s",
             summary=Summary("setting", "documents/s", ("as shipped",), "TF-IDF search on one thread")),
    Headline("KBs of up to 2 million names: lazy build and queries", "speed", "kb_scale.py", "build s"),
    Headline("Filters inside retrieval", "speed", "filter_retrieval.py", "recall@5",
             summary=Summary("system", "recall@5", ("in retrieval",), "post-filter", key="filter")),
    Headline("Serving under load", "serving", "serve_load.py", "requests/s"),
    Headline("Fault probe: bad inputs, kill and resume, rebuild under load", "robustness", "probe.py", ""),
    Headline("Bad and huge inputs", "robustness", "link_stress.py", "outcome",
             summary=Summary("input", "peak RSS MB", ("5 MB document",), "one abstract")),
)


class LogError(Exception):
    """A log that the page cannot be built from, with the file and line to fix."""


@dataclass
class Section:
    path: Path
    line: int
    date: str
    title: str
    commit: str
    anchor: str
    command: str | None = None
    context: str = ""  # what the Command line says after the command (machine, data)
    tables: list[list[str]] = field(default_factory=list)


@dataclass
class Log:
    path: Path
    title: str
    purpose: str
    sections: list[Section]


def read_log(path: Path) -> Log:
    """A log's title, purpose (its first paragraph) and dated sections, in file order."""
    lines = path.read_text(encoding="utf-8").splitlines()
    if not lines or not lines[0].startswith("# "):
        raise LogError(f"{path}:1: a log starts with a '# title' line")
    purpose = " ".join(next((block for block in "\n".join(lines[1:]).split("\n\n") if block.strip()), "").split())
    sections: list[Section] = []
    anchors: dict[str, int] = {}
    table: list[str] = []
    for number, line in enumerate(lines, 1):
        if line.startswith("|"):
            table.append(line)
            continue
        if table and sections:
            sections[-1].tables.append(table)
        table = []
        if line.startswith("## "):
            match = HEADING.fullmatch(line)
            if match is None:
                raise LogError(f"{path}:{number}: expected '## YYYY-MM-DD — title (commit `hash`)', got {line!r}")
            sections.append(Section(path, number, match["date"], match["title"], match["commit"],
                                    _anchor(line[3:], anchors)))
        elif line.startswith("Command:") and sections and sections[-1].command is None:
            match = COMMAND.match(line)
            if match is None:
                raise LogError(f"{path}:{number}: expected 'Command: `…`', got {line[:80]!r}")
            sections[-1].command = match["command"].strip()
            sections[-1].context = line[match.end():].strip(" ·")
    if table and sections:
        sections[-1].tables.append(table)
    return Log(path, lines[0][2:].strip(), purpose, sections)


def _anchor(heading: str, seen: dict[str, int]) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens, -N on repeats."""
    slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
    count = seen.get(slug, 0)
    seen[slug] = count + 1
    return f"{slug}-{count}" if count else slug


def select(headline: Headline, log: Log) -> Section | None:
    """The newest section of `log` the headline's rule picks (logs are appended, newest last)."""
    for section in reversed(log.sections):
        command = f" {section.command} " if section.command else ""
        if (f"benchmarks/{headline.script} " in command and all(f" {o} " in command or f" {o}=" in command
                                                                 for o in headline.having)
                and not any(f" {o} " in command or f" {o}=" in command for o in headline.without)):
            tables = [table for table in section.tables if headline.columns in table[0]]
            if not tables and headline.optional:
                continue
            if not tables:
                raise LogError(f"{section.path}:{section.line}: the section has no table with a "
                               f"{headline.columns!r} column, which the headline {headline.title!r} shows")
            cells = {cell for table in tables for line in table[2:] for cell in _cells(line)}
            if set(headline.rows) <= cells:
                return section
    return None


def _row_of(rows: list[dict], column: str, system: str) -> dict | None:
    """The row whose `column` is `system`, else the first that starts with it (a system named with
    its setting: "hybrid, default (bf16 autocast …)")."""
    return next((row for row in rows if row[column] == system), None) or next(
        (row for row in rows if row[column].startswith(system)), None)


def summary_row(headline: Headline, section: Section, link: str) -> str | None:
    """The headline's one `| result | metric | babelink | baseline | section |` row: per key (a
    set or corpus), the systems' values and the same run's baseline."""
    spec = headline.summary
    ours, theirs = [], []
    for table in section.tables:
        header = _cells(table[0])
        if not {spec.system, spec.metric, *([spec.key] if spec.key else [])} <= set(header):
            continue
        cells = [dict(zip(header, _cells(line))) for line in table[2:]]
        keys = dict.fromkeys(row.get(spec.key, "") if spec.key else "" for row in cells)
        for key in (key for key in keys if key.startswith(spec.key_prefix)):
            group = [row for row in cells if not spec.key or row[spec.key] == key]
            baseline = _row_of(group, spec.system, spec.baseline)
            found = [row for row in (_row_of(group, spec.system, system) for system in spec.systems) if row]
            if baseline is None or not found:
                continue
            where = f"{key}: " if key else ""
            ours.append(where + ", ".join(f"{row[spec.system]} {row[spec.metric]}" for row in found))
            theirs.append(f"{where}{baseline[spec.system]} {baseline[spec.metric]}")
    if not ours:
        return None
    return (f"| {headline.title} | {spec.metric} | {'; '.join(ours)} | {'; '.join(theirs)} "
            f"| [{section.date}, `{section.commit}`]({link}) |")


def _cells(line: str) -> list[str]:
    return [cell.replace("**", "").strip() for cell in line.strip().strip("|").split("|")]


def render(log_dir: Path) -> str:
    logs = {path.stem: read_log(path) for path in sorted(log_dir.glob("*.md"))}
    out = [
        "# Benchmarks",
        "",
        "What babelink scores today. This page is generated by `python benchmarks/results_page.py` from the",
        "dated sections in `benchmarks/log/`; do not edit it by hand. Every number was measured by a script",
        "under `benchmarks/` at the commit shown, against baselines measured in the same run. Protocol",
        "(`docs/ARCHITECTURE.md`): concept-level Acc@k (a prediction is correct when it equals any gold ID);",
        "XL-BEL and Mantra GSC on `open-umls` score the in-KB subset (≥ 1 gold CUI in the KB); NCBI-disease",
        "and BC5CDR-Disease use CTD MEDIC with alternative IDs mapped to primary IDs; document linking is",
        "scored by strict (exact offsets and concept) and partial mention P/R/F1. `$BABELINK_HOME` in a",
        "command is babelink's cache directory (default `~/.cache/babelink`).",
        "",
    ]
    summary: list[str] = []
    details: list[str] = []
    for headline in HEADLINES:
        if headline.area not in logs:
            raise LogError(f"{log_dir / headline.area}.md: missing; the headline {headline.title!r} reads it")
        section = select(headline, logs[headline.area])
        if section is None:
            continue
        link = f"benchmarks/log/{section.path.name}#{section.anchor}"
        row = summary_row(headline, section, link) if headline.summary else None
        if row is not None:
            summary.append(row)
        details += ["", f"### {headline.title}", "",
                    f"{section.date}, commit `{section.commit}` ([log]({link})): `{section.command}`"
                    + (f" · {section.context}" if section.context else "")]
        for table in section.tables:
            if headline.columns in table[0]:
                details += ["", *table]
    out += ["", "## Current results", "",
            "One row per headline result, each beside the baseline of the same run; the full tables follow.", "",
            "| result | metric | babelink | baseline (same run) | section |",
            "|---|---|---|---|---|",
            *summary, *details]
    out += ["", "## Logs", "", "| log | what it records | sections | dates |", "|---|---|---:|---|"]
    for name, log in logs.items():
        dates = sorted(section.date for section in log.sections)
        span = f"{dates[0]} – {dates[-1]}" if dates else "—"
        out.append(f"| [{log.title}](benchmarks/log/{name}.md) | {log.purpose} | {len(log.sections)} | {span} |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the page differs from the logs")
    parser.add_argument("--logs", type=Path, default=LOG_DIR, help="the log directory")
    parser.add_argument("--page", type=Path, default=PAGE, help="the page to write or check")
    args = parser.parse_args(argv)
    try:
        text = render(args.logs)
    except LogError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.check:
        if not args.page.is_file() or args.page.read_text(encoding="utf-8") != text:
            print(f"{args.page} is not what the logs generate: run python benchmarks/results_page.py",
                  file=sys.stderr)
            return 1
        return 0
    write_text_atomic(args.page, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
