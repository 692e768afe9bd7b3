"""Where `--output` points: pipes and devices are streamed to, symlinks followed, inputs never overwritten."""

import json
import os
import threading

import pytest
from support import babelink


def _read_fifo(path, into: list) -> threading.Thread:
    def read():
        with open(path, encoding="utf-8") as stream:
            into.append(stream.read())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    return reader


@pytest.mark.parametrize("command", ["normalize", "link"])
def test_output_to_a_fifo_is_streamed(bundle, tmp_path, command):
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    received: list[str] = []
    reader = _read_fifo(fifo, received)
    argument = "asthma" if command == "normalize" else "Asthma and myocardial infarction."
    result = babelink(command, "--bundle", bundle, argument, "--output", fifo)
    reader.join(timeout=60)
    assert result.returncode == 0, result.stderr
    assert fifo.is_fifo()  # not replaced by a regular file
    records = [json.loads(line) for line in received[0].splitlines()]
    assert len(records) == 1 and ("candidates" in records[0] or "mentions" in records[0])


def test_dev_stdout_is_written_in_place(bundle):
    result = babelink("normalize", "--bundle", bundle, "asthma", "--output", "/dev/stdout")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["mention"] == "asthma"
    assert os.path.islink("/dev/stdout") or not os.path.isfile("/dev/stdout")


def test_symlinked_output_writes_the_target_and_keeps_the_link(bundle, tmp_path):
    target = tmp_path / "results.jsonl"
    target.write_text("old\n")
    link = tmp_path / "latest.jsonl"
    link.symlink_to(target)
    result = babelink("normalize", "--bundle", bundle, "asthma", "--output", link, "--format", "jsonl")
    assert result.returncode == 0, result.stderr
    assert link.is_symlink()
    assert json.loads(target.read_text())["mention"] == "asthma"


def test_unwritable_output_is_named_as_given(bundle, tmp_path):
    missing = tmp_path / "no-such-dir" / "out.jsonl"
    result = babelink("normalize", "--bundle", bundle, "asthma", "--output", missing)
    assert result.returncode != 0
    assert str(missing) in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("alias", ["same", "symlink", "hardlink"])
@pytest.mark.parametrize("command", ["normalize", "link"])
def test_output_that_is_the_input_is_refused(bundle, tmp_path, alias, command):
    source = tmp_path / ("mentions.txt" if command == "normalize" else "docs.txt")
    content = "asthma\n" if command == "normalize" else "Asthma attacks.\n"
    source.write_text(content)
    output = {"same": source, "symlink": tmp_path / "link", "hardlink": tmp_path / "hard"}[alias]
    if alias == "symlink":
        output.symlink_to(source)
    elif alias == "hardlink":
        os.link(source, output)
    result = babelink(command, "--bundle", bundle, "--input", source, "--output", output)
    assert result.returncode != 0
    assert "is the input" in result.stderr and "Traceback" not in result.stderr
    assert source.read_text() == content


def test_build_out_that_is_the_kb_is_refused(tmp_path):
    kb = tmp_path / "kb.tsv"
    kb.write_text("concept_id\tname\nC1\tasthma\n")
    result = babelink("build", "--kb", kb, "--out", kb, "--retriever", "sparse")
    assert result.returncode != 0 and "is the input" in result.stderr
    assert kb.read_text() == "concept_id\tname\nC1\tasthma\n"
