"""BENCHMARKS.md is generated from the logs: the committed page matches them, and a new section becomes current."""

import shutil
from pathlib import Path

import pytest
from support import benchmark_script

ROOT = Path(__file__).resolve().parents[2]
results_page = benchmark_script("results_page")

SECTION = """
## 2031-01-02 — normalization (commit `abcdef1`)

Command: `python benchmarks/normalization.py --kb ctd-medic` · machine: test

| set | KB | system | Acc@1 |
|---|---|---|---:|
| NCBI-disease test | ctd-medic | sparse | 0.500 |
| NCBI-disease test | ctd-medic | hybrid | 0.999 |
"""


@pytest.fixture
def logs(tmp_path) -> Path:
    return Path(shutil.copytree(ROOT / "benchmarks" / "log", tmp_path / "log"))


def test_committed_page_is_what_the_logs_generate():
    assert results_page.main(["--check"]) == 0


def test_an_appended_section_becomes_the_current_result_of_its_headline(logs, tmp_path):
    before = results_page.render(logs)
    with open(logs / "normalization.md", "a", encoding="utf-8") as stream:
        stream.write(SECTION)
    page = tmp_path / "BENCHMARKS.md"
    assert results_page.main(["--logs", str(logs), "--page", str(page)]) == 0
    after = page.read_text(encoding="utf-8")
    ctd = after.split("### Normalization, CTD MEDIC, bundled encoder")[1].split("###")[0]
    assert "commit `abcdef1`" in ctd and "| NCBI-disease test | ctd-medic | hybrid | 0.999 |" in ctd
    assert "normalization.md#2031-01-02--normalization-commit-abcdef1" in ctd
    assert ("| Normalization, CTD MEDIC, bundled encoder | Acc@1 | NCBI-disease test: hybrid 0.999 "
            "| NCBI-disease test: sparse 0.500 |") in after
    # the other headlines of the area keep their sections
    umls = "### Normalization, UMLS stand-in (open-umls), bundled encoder"
    assert after.split(umls)[1].split("###")[0] == before.split(umls)[1].split("###")[0]
    assert results_page.main(["--check", "--logs", str(logs), "--page", str(page)]) == 0


def test_check_fails_on_a_hand_edited_page(logs, tmp_path, capsys):
    page = tmp_path / "BENCHMARKS.md"
    page.write_text(results_page.render(logs).replace("0.", "1.", 1), encoding="utf-8")
    assert results_page.main(["--check", "--logs", str(logs), "--page", str(page)]) == 1
    assert "is not what the logs generate" in capsys.readouterr().err


def test_malformed_heading_is_reported_with_file_and_line(logs, tmp_path, capsys):
    log = logs / "serving.md"
    lines = log.read_text(encoding="utf-8").count("\n")
    with open(log, "a", encoding="utf-8") as stream:
        stream.write("\n## serving load, no date or commit\n")
    page = tmp_path / "BENCHMARKS.md"
    assert results_page.main(["--logs", str(logs), "--page", str(page)]) == 2
    assert f"serving.md:{lines + 2}: expected '## YYYY-MM-DD" in capsys.readouterr().err
    assert not page.exists()


def test_a_selected_section_without_its_table_is_an_error(logs):
    with open(logs / "normalization.md", "a", encoding="utf-8") as stream:
        stream.write(SECTION.replace("Acc@1", "accuracy"))
    with pytest.raises(results_page.LogError, match=r"normalization\.md:\d+: the section has no table with a 'Acc@1'"):
        results_page.render(logs)


def test_an_optional_headline_passes_over_a_section_that_did_not_measure_it(logs):
    """A training run without a one-pass model leaves that headline to the run before it."""
    optional = results_page.Headline("t", "normalization", "normalization.py", "accuracy", optional=True)
    log = results_page.read_log(logs / "normalization.md")
    assert results_page.select(optional, log) is None  # no section has an 'accuracy' table
    with open(logs / "normalization.md", "a", encoding="utf-8") as stream:
        stream.write(SECTION.replace("Acc@1", "accuracy") + SECTION.replace("2031-01-02", "2031-01-03"))
    chosen = results_page.select(optional, results_page.read_log(logs / "normalization.md"))
    assert chosen.date == "2031-01-02"


def test_a_section_stands_for_every_system_it_measured_whichever_options_ran_it(logs):
    """A run of every system (no `--systems`) is the newest lazy-index result as well."""
    with open(logs / "normalization.md", "a", encoding="utf-8") as stream:
        stream.write(SECTION.replace("ctd-medic", "open-umls").replace("NCBI-disease test", "XL-BEL").replace(
            "| hybrid | 0.999 |", "| hybrid | 0.999 |\n| XL-BEL | open-umls | hybrid, lazy index | 0.998 |"))
    page = results_page.render(logs)
    lazy = page.split("### Lazy index: no name encoded at build")[1].split("###")[0]
    assert "commit `abcdef1`" in lazy and "| hybrid, lazy index | 0.998 |" in lazy
    assert "| Lazy index: no name encoded at build | Acc@1 | XL-BEL: hybrid, lazy index 0.998 |" in page
    kb_mined = page.split("### Lazy index with the KB-mined lexicon")[1].split("###")[0]
    assert "abcdef1" not in kb_mined, "a section without that system's row does not stand for it"


def test_a_run_of_both_kbs_logs_each_as_its_own_command():
    normalization = benchmark_script("normalization")
    assert normalization.kb_command(["--encoder", "e5-sap"], "ctd-medic") == (
        "python benchmarks/normalization.py --kb ctd-medic --encoder e5-sap")
    assert normalization.kb_command(["--kb", "open-umls", "--kb=ctd-medic", "--no-write"], "open-umls") == (
        "python benchmarks/normalization.py --kb open-umls --no-write")
