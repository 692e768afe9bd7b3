"""The held-out-language runner's section: per-language rows, means, and its headline on the page."""

from support import benchmark_script

held_out_names = benchmark_script("held_out_names")
results_page = benchmark_script("results_page")


def _run(hybrid: float, translated: float, lexicon: bool) -> dict:
    scores = {"sparse": 0.1, "hybrid": hybrid, "hybrid + translations": translated}
    return {"n": 4, "read": 10, "lexicon": lexicon,
            "results": {system: {"acc@1": value, "acc@5": value} for system, value in scores.items()}}


def test_the_section_gives_means_the_results_page_summarises(tmp_path):
    runs = {"tr": _run(0.4, 0.6, True), "cs": _run(0.3, 0.3, False)}
    section = held_out_names.report(runs, 4, "default", "python benchmarks/held_out_names.py", "abcdef1")
    assert "| tr | 4 / 10 | yes | 0.100 / 0.100 | 0.400 / 0.400 | 0.600 / 0.600 |" in section
    assert "| with a MUSE lexicon (tr) | hybrid + translations | 0.600 |" in section
    assert "| all (tr, cs) | hybrid | 0.350 |" in section
    log = tmp_path / "normalization.md"
    log.write_text("# Normalization log\n\nPurpose.\n\n" + section, encoding="utf-8")
    headline = next(h for h in results_page.HEADLINES if h.script == "held_out_names.py")
    chosen = results_page.select(headline, results_page.read_log(log))
    row = results_page.summary_row(headline, chosen, "link")
    assert "with a MUSE lexicon (tr): hybrid + translations 0.600" in row
    assert "all (tr, cs): hybrid 0.350" in row


def test_the_packaged_encoders_languages_are_named_seen_or_unseen():
    """e5-sap's manifest holds cs, el and vi out: measured alone they are all unseen; tr is not."""
    assert held_out_names.trained_on("e5-sap", ["cs", "vi"]).endswith("every language here is one it never trained on")
    assert "its rows for tr measure languages it trained on" in held_out_names.trained_on("e5-sap", ["cs", "tr"])
