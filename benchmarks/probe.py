"""Fault probe of the CLI: a bad-input corpus, kill-and-resume, and loads during in-place rebuilds.

    python benchmarks/probe.py [--data ../shared/data] [--no-write] [--rebuild-seconds 20]

Every case runs the CLI as a user would (a subprocess) on small
sparse bundles built here, so the probe needs no trained model and takes a few minutes:

- **bad inputs**: each case states what a user must get (`error`: non-zero exit and a one-line
  message naming the file, line or field; `ok`: exit 0 and the output the case names). A
  traceback, a hang (60 s), a clear error where output was due, or success where an error was
  due, is a failure. The target is 0 failures.
- **kill and resume**: `babelink link` over NCBI-disease test is killed (SIGKILL) part-way,
  rerun with the same command, and its output compared with an uninterrupted run's.
- **all capitals**: NCBI-disease test linked as written and with every letter in capitals
  (offsets kept), on a CTD MEDIC bundle; strict precision and recall of both. A text in capitals
  must not link its function words (IS, AS, WAS) as diseases.
- **a bad document in a batch**: NCBI-disease test as JSONL with a lone surrogate in one document;
  `link` must name its file and line, and with `--skip-invalid` link every other document.
- **rebuild under load**: a bundle is rebuilt in place from two KBs in turn while another
  process loads it and normalises a mention; every load must see one build (no errors, no answer
  from the other KB). Loopback HTTP load is `benchmarks/serve_load.py`'s job.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass, replace
from pathlib import Path

from report import arguments, commit, machine, publish

CLI = [sys.executable, "-c", "from babelink.cli import main; main()"]
TIMEOUT = 60
MRCONSO = (
    "C0011849|ENG|P|L1|PF|S1|Y|A1||||MSH|MH|D1|Diabetes Mellitus|0|N||\n"
    "C0004096|ENG|P|L2|PF|S2|Y|A2||||MSH|MH|D2|Asthma|0|N||\n"
    "C0021081|ENG|P|L3|PF|S3|Y|A3||||OMIM|PT|D3|IS|0|N||\n"
    "C0021081|ENG|P|L4|PF|S4|Y|A4||||OMIM|PT|D3|Immune suppression|0|N||\n"
)


@dataclass(frozen=True)
class Case:
    name: str
    args: tuple[str, ...]
    expect: str  # "error" or "ok"
    stdout_has: str = ""  # for "ok": a string the output must contain
    stdout_lacks: str = ""  # for "ok": a string it must not contain
    stdin: str | None = None


def run(args, stdin=None, timeout=TIMEOUT) -> tuple[int | None, str, str]:
    try:
        done = subprocess.run([*CLI, *map(str, args)], input=stdin, capture_output=True, text=True, timeout=timeout,
                              errors="replace", check=False)
    except subprocess.TimeoutExpired:
        return None, "", "hang"
    return done.returncode, done.stdout, done.stderr


def bad_input_cases(work: Path, bundle: Path) -> list[Case]:
    def file(name: str, content: str | bytes) -> Path:
        path = work / name
        path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
        return path

    fifo = work / "out.fifo"
    os.mkfifo(fifo)
    link = work / "latest.jsonl"
    link.symlink_to(file("target.jsonl", "old\n"))
    (work / "d-link").symlink_to(file("d.txt", "Asthma.\n"))
    b = ("--bundle", str(bundle))
    return [
        Case("function words are not diseases", ("link", *b, "The tumor is benign as it was removed."), "ok",
             stdout_lacks="C0021081"),
        Case("capitals acronym still links", ("link", *b, "Signs of IS and asthma."), "ok", stdout_has="C0021081"),
        Case("a text in capitals", ("link", *b, "THE TUMOR IS BENIGN AS IT WAS REMOVED."), "ok",
             stdout_lacks="C0021081"),
        Case("--langs ''", ("normalize", *b, "asthma", "--langs", ""), "ok", stdout_has="C0004096"),
        Case("--output /dev/stdout", ("normalize", *b, "asthma", "--output", "/dev/stdout"), "ok",
             stdout_has="C0004096"),
        Case("--output to a symlink", ("normalize", *b, "asthma", "--output", link), "ok"),
        Case("output is the input", ("normalize", *b, "--input", file("m.txt", "asthma\n"), "--output",
                                     work / "m.txt"), "error"),
        Case("output is the input via a symlink", ("link", *b, "--input", work / "d.txt", "--output", work / "d-link"),
             "error"),
        Case("--top-k 1e9", ("normalize", *b, "asthma", "--top-k", "1000000000"), "error"),
        Case("KB of punctuation only", ("build", "--kb", file("p.tsv", "id\tname\nC1\t---\nC2\t!!\n"), "--out",
                                        work / "pb", "--retriever", "sparse"), "error"),
        Case("TSV header with a repeated column", ("build", "--kb", file("r.tsv", "id\tname\tname\nC1\ta\tb\n"),
                                                   "--out", work / "rb", "--retriever", "sparse"), "error"),
        Case("TSV row with an extra column", ("build", "--kb", file("x.tsv", "id\tname\nC1\tasthma\tstray\n"),
                                              "--out", work / "xb", "--retriever", "sparse"), "error"),
        Case("empty KB after --lang", ("build", "--kb", file("e.tsv", "id\tname\tlang\nC1\tasma\tes\n"), "--lang",
                                       "en", "--out", work / "eb", "--retriever", "sparse"), "error"),
        Case("invalid UTF-8 in a KB", ("build", "--kb", file("u.RRF", b"C1|ENG|P|L|PF|S|Y|A||||M|MH|D|\xff|0|N||\n"),
                                       "--out", work / "ub", "--retriever", "sparse"), "error"),
        Case("PubTator annotation with a bad offset", (
            "build", "--kb", work / "kb.RRF", "--out", work / "sb", "--retriever", "sparse", "--spans-from",
            file("bad.pubtator", "1|t|Asthma.\n1|a|\n1\tx0\t6\tAsthma\tDisease\tC0004096\n\n")), "error"),
        Case("bundle that is not a directory", ("normalize", "--bundle", work / "m.txt", "asthma"), "error"),
        Case("bundle manifest without kb", ("normalize", "--bundle", _damaged(bundle, work), "asthma"), "error"),
        Case("empty mention argument", ("normalize", *b, " "), "error"),
        Case("unusable mention on line 3", ("normalize", *b, "--input", file("bad.jsonl", '"a"\n"b"\n"---"\n')),
             "error"),
        Case("--skip-invalid goes on", ("normalize", *b, "--input", work / "bad.jsonl", "--skip-invalid"), "ok",
             stdout_has='"line": 3'),
        Case("lone surrogate in JSONL", ("link", *b, "--input", file("s.jsonl", '{"id": "1", "text": "\\ud800"}\n')),
             "error"),
        Case("JSONL document without text", ("link", *b, "--input", file("n.jsonl", '{"id": "1"}\n')), "error"),
        Case("duplicate document ids", ("link", *b, "--input",
                                        file("dup.jsonl", '{"id": "1", "text": "a"}\n{"id": "1", "text": "b"}\n')),
             "error"),
        Case("text from stdin", ("link", *b, "--input", "-"), "ok", stdout_has="C0004096",
             stdin='{"id": "1", "text": "Asthma."}\n'),
        Case("wrong model path", ("build", "--kb", work / "kb.RRF", "--out", work / "mb", "--encoder",
                                  work / "no-model"), "error"),
        Case("unwritable output", ("normalize", *b, "asthma", "--output", work / "no-dir" / "o.jsonl"), "error"),
        Case("--output to a FIFO", ("normalize", *b, "asthma", "--output", fifo), "ok"),
    ]


def _damaged(bundle: Path, work: Path) -> Path:
    import shutil

    copy = work / "damaged"
    shutil.copytree(bundle, copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    del manifest["kb"]
    (copy / "manifest.json").write_text(json.dumps(manifest))
    return copy


def judge(case: Case, code: int | None, stdout: str, stderr: str) -> str:
    """"pass", or what went wrong."""
    if code is None:
        return "hang"
    if "Traceback" in stderr:
        return "traceback"
    if case.expect == "error":
        return "pass" if code != 0 and stderr.strip() else "accepted bad input"
    if code != 0:
        return f"refused: {stderr.strip().splitlines()[-1][:80] if stderr.strip() else code}"
    if case.stdout_has and case.stdout_has not in stdout:
        return f"output lacks {case.stdout_has!r}"
    if case.stdout_lacks and case.stdout_lacks in stdout:
        return f"output has {case.stdout_lacks!r}"
    return "pass"


def probe_bad_inputs(work: Path, bundle: Path) -> list[tuple[Case, str, str]]:
    results = []
    for case in bad_input_cases(work, bundle):
        reader = None
        if case.name == "--output to a FIFO":  # somebody must read the pipe
            reader = subprocess.Popen(["cat", str(work / "out.fifo")], stdout=subprocess.DEVNULL)
        code, stdout, stderr = run(case.args, case.stdin)
        if reader is not None:
            reader.wait(timeout=TIMEOUT)
        results.append((case, judge(case, code, stdout, stderr), _last_message(stderr, work)))
    return results


def _last_message(stderr: str, work: Path) -> str:
    """The last stderr line with words (typer frames usage errors in a box), scratch paths shortened."""
    lines = [line.strip(" │╭╮╰╯─") for line in stderr.splitlines()]
    words = [line for line in lines if any(character.isalpha() for character in line)]
    return words[-1].replace(str(work), "…") if words else ""


def probe_kill_and_resume(work: Path, bundle: Path, corpus: Path) -> dict:
    reference, resumed = work / "reference.jsonl", work / "resumed.jsonl"
    run(["link", "--bundle", bundle, "--input", corpus, "--output", reference], timeout=600)
    process = subprocess.Popen([*CLI, "link", "--bundle", str(bundle), "--input", str(corpus), "--output",
                                str(resumed)], stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not resumed.exists() or resumed.stat().st_size < 20_000):
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    lines_at_kill = resumed.read_text(encoding="utf-8", errors="replace").count("\n") if resumed.exists() else 0
    code, _, stderr = run(["link", "--bundle", bundle, "--input", corpus, "--output", resumed], timeout=600)
    same = code == 0 and resumed.read_bytes() == reference.read_bytes()
    message = _last_message(stderr, work)
    return {"lines at kill": lines_at_kill, "identical after resume": same, "resume message": message[:80]}


def probe_all_capitals(ctd: Path, corpus: Path) -> dict:
    from babelink.augment import gold_resolver
    from babelink.eval.linking import in_kb_gold
    from babelink.eval.metrics import span_scores
    from babelink.formats.pubtator import iter_pubtator
    from babelink.linker import Linker

    linker = Linker.open(ctd)
    documents = list(iter_pubtator(corpus))
    gold = [(*span, ids) for span, ids in in_kb_gold(documents, gold_resolver(linker.bundle.kb)).items()]
    found = {}
    for name, text_of in (("as written", lambda text: text), ("in capitals", _capitals)):
        shown = [replace(d, text=text_of(d.text), annotations=()) for d in documents]
        linked = linker.link_documents(shown)
        predicted = [(d.id, m.start, m.end, m.concept.concept_id) for d in linked for m in d.mentions]
        strict = span_scores(predicted, gold)["strict"]
        function_words = sum(m.text in ("IS", "AS", "WAS", "IT", "ALL", "OR") for d in linked for m in d.mentions)
        found[f"{name}: precision / recall"] = f"{strict['precision']:.3f} / {strict['recall']:.3f}"
        found[f"{name}: mentions, of them function words"] = f"{len(predicted):,}, {function_words}"
    return found


def _capitals(text: str) -> str:
    """Every letter in capitals where that keeps its length (ß stays: "SS" would move the offsets)."""
    return "".join(upper if len(upper := char.upper()) == 1 else char for char in text)


def probe_bad_document_in_batch(work: Path, ctd: Path, corpus: Path) -> dict:
    from babelink.formats.pubtator import iter_pubtator

    documents = list(iter_pubtator(corpus))
    bad = len(documents) // 2
    lines = [json.dumps({"id": d.id, "text": d.text}) for d in documents]
    lines[bad] = lines[bad].replace('"text": "', '"text": "\\ud800', 1)  # a lone surrogate, as JSON escapes it
    batch = work / "batch.jsonl"
    batch.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, _, stderr = run(["link", "--bundle", ctd, "--input", batch, "--output", work / "stopped.jsonl"], timeout=600)
    skipped_code, _, _ = run(["link", "--bundle", ctd, "--input", batch, "--output", work / "skipped.jsonl",
                              "--skip-invalid"], timeout=600)
    records = [json.loads(line) for line in (work / "skipped.jsonl").read_text(encoding="utf-8").splitlines()]
    return {"documents, bad one at line": f"{len(documents):,}, {bad + 1}",
            "without --skip-invalid: exit, message": f"{code}, {_last_message(stderr, work)[:70]}",
            "with --skip-invalid: exit, records, errors": (f"{skipped_code}, {len(records):,}, "
                                                            f"{sum('error' in record for record in records)}")}


REBUILD_LOADER = textwrap.dedent("""
    import collections, json, sys, time
    from babelink.bundle.store import load_bundle
    from babelink.linker import Linker
    path, seconds = sys.argv[1], float(sys.argv[2])
    loads = wrong = 0
    errors = collections.Counter()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            bundle = load_bundle(path)
            top = Linker(bundle).normalize("fever", top_k=1)[0]
        except Exception as error:  # any failure is a finding, counted by kind
            errors[type(error).__name__] += 1
            continue
        loads += 1
        wrong += (top.concept_id, top.matched_name) != (("A1" if len(bundle.kb) == 2 else "B2"), "fever")
    print(json.dumps({"loads": loads, "errors": errors, "wrong": wrong}))
""")


def probe_rebuild_under_load(work: Path, seconds: float) -> dict:
    kbs = [work / "a.tsv", work / "b.tsv"]
    kbs[0].write_text("id\tname\nA1\tfever\nA2\tnausea\n")
    kbs[1].write_text("id\tname\nB1\tnausea\nB2\tfever\nB3\tasthma\n")
    bundle = work / "rebuilt"
    run(["build", "--kb", kbs[0], "--out", bundle, "--retriever", "sparse"])
    loader = subprocess.Popen([sys.executable, "-c", REBUILD_LOADER, str(bundle), str(seconds)],
                              stdout=subprocess.PIPE, text=True)
    rebuilds = 0
    while loader.poll() is None:
        run(["build", "--kb", kbs[(rebuilds + 1) % 2], "--out", bundle, "--retriever", "sparse"])
        rebuilds += 1
    found = json.loads(loader.stdout.read())
    failed = ", ".join(f"{kind} {count}" for kind, count in found["errors"].items()) or "0"
    return {"rebuilds": f"{rebuilds:,}", "loads": f"{found['loads']:,}", "failed loads": failed,
            "wrong answers": f"{found['wrong']:,}"}


def report(bad: list[tuple[Case, str, str]], resume: dict, capitals: dict, batch: dict, rebuild: dict,
           seconds: float) -> str:
    failures = [(case, outcome) for case, outcome, _ in bad if outcome != "pass"]
    lines = [
        f"## {time.strftime('%Y-%m-%d')} — fault probe (commit `{commit()}`)",
        "",
        (f"Command: `python benchmarks/probe.py {' '.join(sys.argv[1:])}` · machine: {machine()} · small sparse "
         "bundles built by the script, NCBI-disease test for kill-and-resume"),
        "",
        f"Bad inputs: {len(bad)} cases, **{len(failures)} failures** (target 0).",
        "",
        "| case | expected | outcome | message (last stderr line) |",
        "|---|---|---|---|",
        *(f"| {case.name} | {case.expect} | {outcome} | {message[:90].replace('|', '/')} |"
          for case, outcome, message in bad),
        "",
        ("Kill and resume (`babelink link` to JSONL, SIGKILL part-way, same command again), and "
         f"{seconds:.0f} s of loads in one process while another rebuilds the bundle in place:"),
        "",
        "| probe | result |",
        "|---|---|",
        *(f"| kill and resume: {key} | {value} |" for key, value in resume.items()),
        *(f"| NCBI-disease test {key} | {value} |" for key, value in capitals.items()),
        *(f"| bad document in a batch: {key} | {value} |" for key, value in batch.items()),
        *(f"| rebuild under load: {key} | {value} |" for key, value in rebuild.items()),
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rebuild-seconds", type=float, default=20.0, help="how long to load during rebuilds")
    args = arguments(__doc__, parser)
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        (work / "kb.RRF").write_text(MRCONSO)
        bundle = work / "bundle"
        code, _, stderr = run(["build", "--kb", work / "kb.RRF", "--out", bundle, "--retriever", "sparse"])
        if code != 0:
            raise SystemExit(f"cannot build the probe bundle: {stderr}")
        ctd = work / "ctd"
        run(["build", "--kb", args.data / "kb" / "ctd-medic" / "CTD_diseases.tsv.gz", "--out", ctd, "--retriever",
             "sparse"], timeout=900)
        bad = probe_bad_inputs(work, bundle)
        ncbi_test = args.data / "bench" / "ncbi_disease" / "NCBItestset_corpus.txt"
        resume = probe_kill_and_resume(work, ctd, ncbi_test)
        capitals = probe_all_capitals(ctd, ncbi_test)
        batch = probe_bad_document_in_batch(work, ctd, ncbi_test)
        rebuild = probe_rebuild_under_load(work, args.rebuild_seconds)
    publish(report(bad, resume, capitals, batch, rebuild, args.rebuild_seconds), not args.no_write, "robustness")


if __name__ == "__main__":
    main()
