"""Corpus-scale `babelink link`: killed runs resume without loss or duplicates; the Ray engine
writes what the local one does."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from support import babelink

from babelink.bundle.store import build_bundle, load_bundle
from babelink.corpus.resume import resume_jsonl
from babelink.kb.base import KnowledgeBaseBuilder
from babelink.link.documents import LinkParams
from babelink.link.settings import settings_id

NAMES = {
    "C0011849": ["Diabetes mellitus", "Diabetes", "糖尿病", "סוכרת"],
    "C0020538": ["Hypertension", "High blood pressure", "高血压"],
    "C0004096": ["Asthma", "Asma"],
}
TEXTS = ["Patient {} has asthma and diabetes.", "患者{}有糖尿病和高血压。", "No finding in case {}.",
         "Hypertension and asma, case {}.", "לחולה {} יש סוכרת."]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """(bundle, corpus.jsonl, its 40 lines, the output of an uninterrupted run)."""
    directory = tmp_path_factory.mktemp("batch")
    builder = KnowledgeBaseBuilder()
    for concept_id, names in NAMES.items():
        for position, name in enumerate(names):
            builder.add_name(concept_id, name, preferred=position == 0)
    bundle = build_bundle(builder.build(), directory / "bundle", retriever="sparse")
    lines = [json.dumps({"id": f"doc-{i:02d}", "text": TEXTS[i % len(TEXTS)].format(i)}, ensure_ascii=False) + "\n"
             for i in range(40)]
    (directory / "corpus.jsonl").write_text("".join(lines), encoding="utf-8")
    result = babelink("link", "-b", bundle, "-i", directory / "corpus.jsonl", "-o", directory / "reference.jsonl")
    assert result.returncode == 0, result.stderr
    reference = (directory / "reference.jsonl").read_text(encoding="utf-8")
    assert reference.count("\n") == 40 and '"concept": "C0011849"' in reference
    return bundle, directory / "corpus.jsonl", lines, reference


def _ids(text):
    return [json.loads(line)["id"] for line in text.splitlines()]


def test_killed_run_resumes_without_loss_or_duplicates(corpus, tmp_path):
    bundle, corpus_path, lines, reference = corpus
    output = tmp_path / "out.jsonl"
    # Documents arrive on stdin one at a time, so the kill lands after exactly what was flushed.
    process = subprocess.Popen(
        [sys.executable, "-c", "from babelink.cli import main; main()", "link", "-b", str(bundle), "-i", "-",
         "-o", str(output), "--batch-size", "1"], stdin=subprocess.PIPE, stderr=subprocess.DEVNULL)
    process.stdin.write("".join(lines[:10]).encode())
    process.stdin.flush()
    deadline = time.monotonic() + 120
    while not (output.exists() and output.read_text(encoding="utf-8").count("\n") >= 5):
        assert time.monotonic() < deadline and process.poll() is None, "no output from the first run"
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    process.stdin.close()
    written = output.read_text(encoding="utf-8")
    assert 5 <= written.count("\n") <= 10 and reference.startswith(written)

    result = babelink("link", "-b", bundle, "-i", corpus_path, "-o", output)
    assert result.returncode == 0, result.stderr
    assert f"skipping {written.count(chr(10))} documents already linked" in result.stderr
    resumed = output.read_text(encoding="utf-8")
    assert len(set(_ids(resumed))) == len(_ids(resumed)) == 40
    assert resumed == reference


def test_partial_last_line_is_cut_and_redone(corpus, tmp_path):
    bundle, corpus_path, _, reference = corpus
    output = tmp_path / "out.jsonl"
    complete = reference.splitlines(keepends=True)[:7]
    output.write_text("".join(complete) + reference.splitlines()[7][:25], encoding="utf-8")  # killed mid-write
    assert resume_jsonl(output) == set(_ids("".join(complete)))
    assert output.read_text(encoding="utf-8") == "".join(complete)
    output.write_text(output.read_text(encoding="utf-8") + reference.splitlines()[7][:25], encoding="utf-8")
    result = babelink("link", "-b", bundle, "-i", corpus_path, "-o", output, "--batch-size", "3")
    assert result.returncode == 0, result.stderr
    assert output.read_text(encoding="utf-8") == reference


def test_overwrite_and_foreign_files(corpus, tmp_path):
    bundle, corpus_path, _, reference = corpus
    output = tmp_path / "out.jsonl"
    output.write_text('{"mention": "asthma", "candidates": []}\n', encoding="utf-8")
    result = babelink("link", "-b", bundle, "-i", corpus_path, "-o", output)
    assert result.returncode == 1 and "out.jsonl:1: not a line of `babelink link` JSONL output" in result.stderr
    assert "give --overwrite" in result.stderr and "Traceback" not in result.stderr
    result = babelink("link", "-b", bundle, "-i", corpus_path, "-o", output, "--overwrite")
    assert result.returncode == 0, result.stderr
    assert output.read_text(encoding="utf-8") == reference
    assert "is the input" in babelink("link", "-b", bundle, "-i", corpus_path, "-o", corpus_path).stderr


def test_an_output_of_another_bundle_is_not_resumed_into(corpus, tmp_path):
    _, corpus_path, _, reference = corpus
    output = tmp_path / "out.jsonl"
    output.write_text("".join(reference.splitlines(keepends=True)[:5]), encoding="utf-8")
    builder = KnowledgeBaseBuilder()
    builder.add_name("C0004096", "Asthma", preferred=True)
    other = build_bundle(builder.build(), tmp_path / "other", retriever="sparse")
    result = babelink("link", "-b", other, "-i", corpus_path, "-o", output)
    assert result.returncode == 1 and "out.jsonl:1: linked with bundle " in result.stderr
    assert "resuming would mix the two" in result.stderr and output.read_text(encoding="utf-8").count("\n") == 5


@pytest.mark.parametrize("output_format", ["jsonl", "brat"])
def test_an_output_linked_with_other_settings_is_not_resumed_into(corpus, tmp_path, output_format):
    bundle, _, lines, _ = corpus
    (tmp_path / "small.jsonl").write_text("".join(lines[:3]), encoding="utf-8")
    output = tmp_path / "out"
    command = ("link", "-b", bundle, "-i", tmp_path / "small.jsonl", "-o", output, "--format", output_format)
    assert babelink(*command, "--min-probability", "0.3").returncode == 0
    written = sorted(output.rglob("*")) if output.is_dir() else output.read_text(encoding="utf-8")
    for other in (["--keep-modifiers", "--min-probability", "0.3"], []):
        refused = babelink(*command, *other)
        assert refused.returncode == 1 and "linked with settings " in refused.stderr, refused.stderr
        assert "resuming would mix the two" in refused.stderr and "Traceback" not in refused.stderr
    assert (sorted(output.rglob("*")) if output.is_dir() else output.read_text(encoding="utf-8")) == written
    resumed = babelink(*command, "--min-probability", "0.3")
    assert resumed.returncode == 0 and "skipping 3 documents" in resumed.stderr, resumed.stderr


def test_a_document_that_could_not_be_linked_is_resumed_past(corpus, tmp_path):
    bundle, _, lines, _ = corpus
    inputs = tmp_path / "in.jsonl"
    inputs.write_text(lines[0] + json.dumps({"id": "bad", "text": "fever \ud800"}) + "\n" + lines[1], encoding="utf-8")
    output = tmp_path / "out.jsonl"
    first = babelink("link", "-b", bundle, "-i", inputs, "-o", output, "--skip-invalid")
    assert first.returncode == 0 and '"id": "bad", "error"' in output.read_text(encoding="utf-8"), first.stderr
    again = babelink("link", "-b", bundle, "-i", inputs, "-o", output, "--skip-invalid")
    assert again.returncode == 0 and "skipping 3 documents" in again.stderr, again.stderr


def test_brat_output_skips_finished_documents(corpus, tmp_path):
    bundle, corpus_path, _, _ = corpus
    directory = tmp_path / "brat"
    result = babelink("link", "-b", bundle, "-i", corpus_path, "-o", directory, "--format", "brat")
    assert result.returncode == 0, result.stderr
    first = {path.name: path.read_text(encoding="utf-8") for path in directory.iterdir()}
    assert len(first) == 81 and not [name for name in first if name.startswith(".")]
    assert json.loads(first["babelink-provenance.json"]) == {**load_bundle(bundle).provenance,
                                                             "settings": settings_id(LinkParams())}
    (directory / "doc-03.ann").unlink()  # killed before its .ann was renamed into place
    (directory / "doc-04.ann").write_text("kept\n", encoding="utf-8")
    result = babelink("link", "-b", bundle, "-i", corpus_path, "-o", directory, "--format", "brat")
    assert result.returncode == 0, result.stderr
    assert "skipping 39 documents" in result.stderr
    assert (directory / "doc-03.ann").read_text(encoding="utf-8") == first["doc-03.ann"]
    assert (directory / "doc-04.ann").read_text(encoding="utf-8") == "kept\n"
    result = babelink("link", "-b", bundle, "-i", corpus_path, "-o", directory, "--format", "brat", "--overwrite")
    assert result.returncode == 0, result.stderr
    assert {path.name: path.read_text(encoding="utf-8") for path in directory.iterdir()} == first
    builder = KnowledgeBaseBuilder()
    builder.add_name("C0004096", "Asthma", preferred=True)
    other = build_bundle(builder.build(), tmp_path / "other", retriever="sparse")
    (directory / "doc-03.ann").unlink()
    refused = babelink("link", "-b", other, "-i", corpus_path, "-o", directory, "--format", "brat")
    assert refused.returncode == 1 and "babelink-provenance.json: linked with bundle " in refused.stderr
    assert not (directory / "doc-03.ann").exists()
    (directory / "babelink-provenance.json").unlink()  # as written before outputs named their bundle
    resumed = babelink("link", "-b", other, "-i", corpus_path, "-o", directory, "--format", "brat")
    assert resumed.returncode == 0 and not (directory / "babelink-provenance.json").exists()


def test_ray_engine_writes_what_the_local_engine_does(corpus, tmp_path):
    pytest.importorskip("ray.data")
    bundle, _, lines, reference = corpus
    (tmp_path / "small.jsonl").write_text("".join(lines[:20]), encoding="utf-8")
    output = tmp_path / "out.jsonl"
    result = babelink("link", "-b", bundle, "-i", tmp_path / "small.jsonl", "-o", output, "--engine", "ray",
                      "--ray-workers", "2", "--batch-size", "2")
    assert result.returncode == 0, result.stderr
    assert output.read_text(encoding="utf-8") == "".join(reference.splitlines(keepends=True)[:20])
