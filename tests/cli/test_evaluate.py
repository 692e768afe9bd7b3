"""`babelink evaluate` on the output of `babelink link`, through the CLI as users run it."""

import json

from support import babelink, build_sparse_bundle


def test_evaluate_scores_the_output_of_link_on_the_corpus(bundle, tmp_path):
    corpus = tmp_path / "gold.txt"
    corpus.write_text("7|t|Asthma and diabetes mellitus\n7|a|Myocardial infarction.\n"
                      "7\t0\t6\tAsthma\tDisease\tD001249\n7\t11\t28\tdiabetes mellitus\tDisease\tC0011849\n"
                      "7\t29\t50\tMyocardial infarction\tDisease\tC0027051\n\n")
    assert babelink("link", "-b", bundle, "-i", corpus, "-o", tmp_path / "out.jsonl").returncode == 0
    result = babelink("evaluate", "-b", bundle, "--gold", corpus, "--predicted", tmp_path / "out.jsonl")
    assert result.returncode == 0, result.stderr
    scores = json.loads(result.stdout)
    assert scores["mentions"]["gold_in_kb"] == 2  # D001249 is a MeSH id, not this UMLS bundle's
    assert scores["linking"]["strict"]["recall"] == 1.0

    other = tmp_path / "other.txt"
    other.write_text(corpus.read_text().replace("7", "8"))
    refused = babelink("evaluate", "-b", bundle, "--gold", other, "--predicted", tmp_path / "out.jsonl")
    assert refused.returncode == 1
    assert refused.stderr.startswith("babelink: error: ") and "document '7' is not in the gold corpus" in refused.stderr


def test_evaluate_refuses_a_bioc_output_of_another_bundle(bundle, tmp_path):
    corpus = tmp_path / "gold.txt"
    corpus.write_text("7|t|Asthma\n7\t0\t6\tAsthma\tDisease\tC0004096\n\n")
    linked = tmp_path / "linked.xml"
    assert babelink("link", "-b", bundle, "-i", corpus, "-o", linked, "--format", "bioc").returncode == 0
    assert json.loads(babelink("evaluate", "-b", bundle, "-g", corpus, "-p", linked).stdout)["linking"]["strict"][
        "f1"] == 1.0
    other = build_sparse_bundle({"C0004096": ["Asthma"]}, tmp_path / "other")
    refused = babelink("evaluate", "-b", other, "-g", corpus, "-p", linked)
    assert refused.returncode == 1 and "was linked with bundle" in refused.stderr
