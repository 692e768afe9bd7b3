import pytest

from babelink.errors import BabelinkError, InputFormatError
from babelink.formats.document import Annotation, Document
from babelink.kb.base import KnowledgeBaseBuilder
from babelink.train.pairs import PositivePair, mention_names, positive_pairs, synonym_names, translation_pairs


@pytest.fixture
def kb():
    builder = KnowledgeBaseBuilder()
    for concept, names in {"C1": [("Vaccination", "en"), ("Active immunization", "en"), ("Vacunación", "es"),
                                  ("予防接種", "ja"), ("vaccination", "en")],
                           "C2": [("Fever", "en"), ("Fiebre", "es")]}.items():
        for name, lang in names:
            builder.add_name(concept, name, lang=lang)
    return builder.build()


def test_synonym_sets_follow_001_table_3(kb):
    assert synonym_names(kb, "en_syn") == [("vaccination", "C1"), ("active immunization", "C1"), ("fever", "C2")]
    assert synonym_names(kb, "SPA_syn") == [("vacunación", "C1"), ("fiebre", "C2")]
    assert len(synonym_names(kb, "all_syn")) == 6  # case variants collapse
    with pytest.raises(BabelinkError, match="synonym set"):
        synonym_names(kb, "spanish")


def test_positive_pairs_are_all_combinations_capped_per_concept():
    names = [(f"name {i}", "C1") for i in range(12)] + [("a", "C2"), ("b", "C2"), ("a", "C2"), ("alone", "C3")]
    pairs = positive_pairs(names, max_pairs_per_concept=50, seed=1)
    by_label = {label: [p for p in pairs if p.label == label] for label in ("C1", "C2", "C3")}
    assert len(by_label["C1"]) == 50  # 66 combinations trimmed to 50
    assert by_label["C2"] == [PositivePair("a", "b", "C2")]  # repeated names do not pair with themselves
    assert by_label["C3"] == []
    assert len({(p.first, p.second) for p in by_label["C1"]}) == 50
    assert positive_pairs(names, seed=1) == pairs and positive_pairs(names, seed=2) != pairs
    assert len(positive_pairs(names, max_pairs_per_concept=5)) == 5 + 1


def test_translation_pairs_are_pseudo_classes(tmp_path):
    path = tmp_path / "en-es.tsv"
    path.write_text("fever\tfiebre\nfever\tcalentura\nFever\tfiebre\n100\t100\n")
    pairs = translation_pairs(path)
    assert [(p.first, p.second) for p in pairs] == [("fever", "fiebre"), ("fever", "calentura")]
    assert len({p.label for p in pairs}) == 2
    path.write_text("fever\tfiebre\nonly-one-column\n")
    with pytest.raises(InputFormatError, match=r"en-es.tsv:2: expected two columns"):
        translation_pairs(path)


def test_mention_names_pair_mentions_with_gold_synonyms(kb):
    document = Document("1", "Fiebre alta", (Annotation(0, 6, "Fiebre", ("C2",)), Annotation(7, 11, "alta", ("C9",))))
    pairs = mention_names([document], kb)
    assert pairs == [PositivePair("fiebre", "fever", "C2")]  # the mention itself and unknown concepts left out
