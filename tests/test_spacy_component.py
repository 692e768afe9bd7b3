"""The "babelink" spaCy component on blank pipelines, found through its entry point."""

import subprocess
import sys

import pytest
from support import build_sparse_bundle

spacy = pytest.importorskip("spacy")

NAMES = {
    "C0011849": ["Diabetes mellitus", "Diabetes", "糖尿病", "סוכרת"],
    "C0020538": ["Hypertension", "High blood pressure", "高血压", "יתר לחץ דם"],
    "C0004096": ["Asthma", "Asma"],
}


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    return str(build_sparse_bundle(NAMES, tmp_path_factory.mktemp("bundles") / "sparse"))


@pytest.fixture(scope="module")
def english(bundle):
    nlp = spacy.blank("en")
    nlp.add_pipe("babelink", config={"bundle": bundle})
    return nlp


def _ents(doc):
    return [(ent.text, ent.label_, ent.kb_id_) for ent in doc.ents]


def test_english_entities_and_extensions(english):
    doc = english("A patient with diabetes mellitus and hypertension, no asthma.")
    assert _ents(doc) == [("diabetes mellitus", "ENTITY", "C0011849"), ("hypertension", "ENTITY", "C0020538"),
                          ("asthma", "ENTITY", "C0004096")]
    first = doc.ents[0]
    assert first._.babelink_name == "Diabetes mellitus" and first._.babelink_score == pytest.approx(1.0)
    assert 0.0 <= first._.babelink_probability <= 1.0
    assert first._.babelink_candidates[0] == {"id": "C0011849", "name": "Diabetes mellitus",
                                              "matched_name": "Diabetes mellitus", "score": 1.0,
                                              "probability": round(first._.babelink_probability, 4),
                                              "codes": {"UMLS": "C0011849"}}
    assert [(m["start"], m["end"], m["concept"]) for m in doc._.babelink_mentions] == [
        (ent.start_char, ent.end_char, ent.kb_id_) for ent in doc.ents]
    assert "candidates" in doc._.babelink_mentions[0]
    assert doc._.babelink_lang == "en"  # the pipeline's


def test_multilingual_pipeline_chinese_and_hebrew(bundle):
    nlp = spacy.blank("xx")
    nlp.add_pipe("babelink", config={"bundle": bundle, "label": "DISEASE"})
    assert _ents(nlp("糖尿病 和 高血压。")) == [("糖尿病", "DISEASE", "C0011849"), ("高血压", "DISEASE", "C0020538")]
    hebrew = nlp("לחולה יש סוכרת וגם יתר לחץ דם.")
    assert _ents(hebrew) == [("סוכרת", "DISEASE", "C0011849"), ("יתר לחץ דם", "DISEASE", "C0020538")]
    assert hebrew.ents[1]._.babelink_name == "Hypertension" and hebrew._.babelink_lang == "he"  # guessed
    unspaced = nlp("患者有糖尿病和高血压。")  # one token holds both mentions: it is neither's entity
    assert _ents(unspaced) == [] and [m["concept"] for m in unspaced._.babelink_mentions] == ["C0011849", "C0020538"]


def test_character_tokens_align_unspaced_chinese(bundle):
    nlp = spacy.blank("zh")  # the default character segmenter: no jieba needed
    nlp.add_pipe("babelink", config={"bundle": bundle})
    assert [ent.kb_id_ for ent in nlp("患者有2型糖尿病和高血压。").ents] == ["C0011849", "C0020538"]


def test_pipe_equals_one_by_one(english):
    texts = ["asthma and diabetes", "Nothing here.", "High blood pressure.", "diabetes, asthma, hypertension"]
    piped = list(english.pipe(texts, batch_size=3))
    assert [_ents(doc) for doc in piped] == [_ents(english(text)) for text in texts]
    assert [[e._.babelink_score for e in doc.ents] for doc in piped] == [
        [e._.babelink_score for e in english(text).ents] for text in texts]


@pytest.mark.parametrize(("overwrite", "expected"), [
    (False, [("diabetes", "MINE", ""), ("hypertension", "ENTITY", "C0020538")]),
    (True, [("diabetes mellitus", "ENTITY", "C0011849"), ("hypertension", "ENTITY", "C0020538")]),
])
def test_existing_entities(bundle, overwrite, expected):
    nlp = spacy.blank("en")
    ruler = nlp.add_pipe("entity_ruler")
    ruler.add_patterns([{"label": "MINE", "pattern": "diabetes"}])
    nlp.add_pipe("babelink", config={"bundle": bundle, "overwrite_ents": overwrite})
    assert _ents(nlp("diabetes mellitus and hypertension")) == expected


def test_config_round_trip(english, bundle):
    config = english.config
    assert config["components"]["babelink"] == {"factory": "babelink", "bundle": bundle, "filter": None, "lang": None,
                                                "batch_size": 16, "overwrite_ents": False, "label": "ENTITY",
                                                "types": None, "sources": None, "langs": None, "model": None,
                                                "keep_modifiers": False}
    restored = spacy.util.load_model_from_config(spacy.util.load_config_from_str(config.to_str()), auto_fill=True)
    assert _ents(restored("asthma")) == [("asthma", "ENTITY", "C0004096")]


def test_entry_point_without_importing_babelink(bundle):
    script = ("import sys, spacy; nlp = spacy.blank('en'); nlp.add_pipe('babelink', config={'bundle': sys.argv[1]}); "
              "print([e.kb_id_ for e in nlp('asthma').ents])")
    result = subprocess.run([sys.executable, "-c", script, bundle], capture_output=True, text=True, timeout=120,
                            check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['C0004096']"


def test_a_word_as_the_configured_language_fails_when_the_pipe_is_added(bundle):
    nlp = spacy.blank("xx")
    with pytest.raises(ValueError, match="babelink component config: lang: 'english' is not a language code"):
        nlp.add_pipe("babelink", config={"bundle": bundle, "lang": "english"})
