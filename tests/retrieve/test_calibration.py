"""Calibrated probabilities: the model file, the features, and `probability` in every output."""

from __future__ import annotations

import json
from itertools import pairwise

import numpy as np
import pytest
from support import babelink, build_sparse_bundle

from babelink.encoders.artefacts import packaged
from babelink.errors import BundleError, InvalidInputError
from babelink.fsutil import sha256_file
from babelink.linker import Linker
from babelink.retrieve.calibration import (
    FEATURES,
    SHIPPED_SUFFIX,
    Calibrator,
    Model,
    candidate_features,
    script_shares,
)
from babelink.retrieve.candidate import Candidate


def test_features_describe_the_ranking():
    candidates = [Candidate("A", "a", "Heart attack", 0.95, dense_score=0.95, sparse_score=0.6,
                            matched_string="heart attack"),
                  Candidate("B", "b", "Heart", 0.90, translated="heart", matched_string="heart")]
    rows = candidate_features("heart attack", candidates, {"LATIN": 0.8})
    named = [dict(zip(FEATURES, row)) for row in rows]
    assert named[0]["exact"] == 1.0 and named[0]["is_best"] == 1.0 and named[0]["sparse"] == 0.6
    assert named[0]["margin_to_next"] == pytest.approx(0.05) and named[1]["gap_to_best"] == pytest.approx(0.05)
    assert named[1]["translated"] == 1.0 and named[1]["sparse"] == 0.90  # no sparse score: the score
    assert named[0]["kb_script_share"] == 0.8
    assert candidate_features("сахар", candidates[:1], {"LATIN": 1.0})[0][FEATURES.index("kb_script_share")] == 0


def test_script_shares():
    assert script_shares(["heart", "coeur", "心脏", "123"]) == {"LATIN": 0.5, "CJK": 0.25, "": 0.25}


def test_a_fitted_model_is_monotone_in_the_score_and_round_trips(tmp_path):
    random = np.random.default_rng(0)
    features = random.uniform(0, 1, size=(400, len(FEATURES)))
    labels = (features[:, 0] + random.normal(0, 0.1, 400) > 0.6).astype(float)
    model = Model.fit(features, labels)
    low, high = features[:1].copy(), features[:1].copy()
    low[0, 0], high[0, 0] = 0.2, 0.95
    assert model.probabilities(low)[0] < 0.5 < model.probabilities(high)[0]
    calibrator = Calibrator({"normalize": model, "link": model}, {"sets": ["synthetic"]})
    calibrator.save(tmp_path / "calibration.json")
    loaded = Calibrator.load(tmp_path / "calibration.json")
    assert np.allclose(loaded.models["link"].probabilities(features), model.probabilities(features))


def test_a_calibrator_with_other_features_is_a_clear_error(tmp_path):
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps({"features": ["score"], "models": {}}), encoding="utf-8")
    with pytest.raises(BundleError, match="calibration.json: unusable calibrator: features"):
        Calibrator.load(path)
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(BundleError, match="unusable calibrator"):
        Calibrator.load(path)


def test_the_shipped_calibrator_loads():
    calibrator = Calibrator.load()
    assert set(calibrator.models) == {"normalize", "link"} and calibrator.trained_on["languages"]


def test_a_packaged_encoder_gets_its_own_calibrator_where_one_ships_and_others_babelinks():
    """A trained encoder's cosines lie elsewhere than the bundled e5's: its probabilities come from
    a calibrator fitted on them where one ships beside it."""
    shipped = Calibrator.load().trained_on
    assert Calibrator.shipped(None).trained_on == shipped and Calibrator.shipped("default").trained_on == shipped
    for name, artefact in packaged().items():
        own = artefact.with_name(name + SHIPPED_SUFFIX)
        assert Calibrator.shipped(name).trained_on == (Calibrator.load(own).trained_on if own.is_file() else shipped)
        if own.is_file():  # fitted on this very artefact's scores: a retrained one needs calibrate.py again
            assert Calibrator.load(own).trained_on["artefact_sha256"] == sha256_file(artefact)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    return build_sparse_bundle({"C1": ["Heart attack", "Myocardial infarction"], "C2": ["Asthma"],
                                "C3": ["Diabetes mellitus"]}, tmp_path_factory.mktemp("b") / "bundle")


def test_every_candidate_has_a_probability_and_nil_below_the_minimum(bundle):
    linker = Linker.open(bundle)
    for candidates in linker.normalize(["heart attack", "asthmatic", "zzzz qqq"], top_k=3):
        assert all(0.0 <= c.probability <= 1.0 for c in candidates)
    exact = linker.normalize("heart attack", top_k=1)[0]
    assert linker.normalize("zzzz qqq", min_probability=exact.probability + 1e-6) == []
    with pytest.raises(InvalidInputError, match="min_probability"):
        linker.normalize("asthma", min_probability=1.5)


def test_a_candidates_probability_does_not_depend_on_how_many_are_asked_for(bundle):
    linker = Linker.open(bundle)
    for mention in ("heart attack", "asthmatic", "diabetes"):
        by_depth = [{c.concept_id: c.probability for c in linker.normalize(mention, top_k=k)} for k in (1, 2, 3)]
        for fewer, more in pairwise(by_depth):
            assert all(more[concept] == pytest.approx(p) for concept, p in fewer.items())
    link = [Linker.open(bundle, top_k=k, min_probability=0).link("He had a heart attack.").mentions for k in (1, 3)]
    assert [m.concept.probability for m in link[0]] == pytest.approx([m.concept.probability for m in link[1]])


def test_probability_in_cli_jsonl_and_bioc(bundle, tmp_path):
    normalized = babelink("normalize", "--bundle", bundle, "heart attack")
    assert 0 <= json.loads(normalized.stdout)["candidates"][0]["probability"] <= 1
    nil = babelink("normalize", "--bundle", bundle, "--min-probability", "1", "zzzz qqq")
    assert json.loads(nil.stdout)["candidates"] == []
    linked = babelink("link", "--bundle", bundle, "--min-probability", "0", "He had a heart attack and asthma.")
    mentions = json.loads(linked.stdout)["mentions"]
    assert mentions and all(0 <= m["probability"] <= 1 for m in mentions)
    bioc = babelink("link", "--bundle", bundle, "--format", "bioc", "--min-probability", "0",
                    "He had a heart attack.")
    assert '<infon key="probability">' in bioc.stdout
    refused = babelink("link", "--bundle", bundle, "--min-probability", "2", "asthma")
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
