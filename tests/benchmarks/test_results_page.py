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
