"""The embedded default bundle's recipe: its encoder is one a default may ship, and it is built with it."""

from __future__ import annotations

from babelink.bundle.default import DEFAULT_ENCODER, DEFAULT_LINK_THRESHOLDS, write_default_bundle
from babelink.bundle.store import load_bundle
from babelink.encoders import DEFAULT
from babelink.encoders.artefacts import MAX_BYTES, packaged, read_manifest
from babelink.encoders.e5_bundled import base_sha256
from babelink.kb.base import KnowledgeBaseBuilder
from babelink.linker import Linker
from babelink.retrieve.calibration import Calibrator
from babelink.translate.mining import mine_lexicon


def test_the_default_encoder_is_one_a_default_may_ship():
    """The bundled e5, or a packaged artefact trained on it from sources whose terms let a default
    be derived from them (issue 40: a MUSE-trained artefact is opt-in only)."""
    if DEFAULT_ENCODER == DEFAULT:
        return
    artefact = packaged()[DEFAULT_ENCODER]
    manifest = read_manifest(artefact)
    assert manifest["kind"] in ("lora", "student")
    assert manifest["training"]["default_eligible"]
    assert manifest["base"]["sha256"] == base_sha256()
    assert artefact.stat().st_size <= MAX_BYTES


def test_the_default_bundle_is_built_and_queried_with_its_encoder(tmp_path):
    builder = KnowledgeBaseBuilder()
    for concept_id, names in {"HP:0001658": [("Myocardial infarction", "en"), ("Heart attack", "en"),
                                             ("Infarto de miocardio", "es")],
                              "HP:0000822": [("Hypertension", "en"), ("Hipertensión arterial", "es")],
                              "HP:0001945": [("Fever", "en"), ("Fiebre", "es")]}.items():
        for position, (name, lang) in enumerate(names):
            builder.add_name(concept_id, name, lang=lang, preferred=position == 0)
    kb = builder.build()
    bundle = load_bundle(write_default_bundle(kb, mine_lexicon(kb), tmp_path / "default"))
    assert bundle.manifest["dense"]["encoder"]["name"] == DEFAULT_ENCODER
    assert bundle.manifest["dense"]["index"]["kind"] == "lazy"
    assert bundle.manifest["kb"]["source"]["name"] == "embedded-default"
    assert bundle.manifest["link"] == DEFAULT_LINK_THRESHOLDS  # chosen on dev for its encoder
    linker = Linker(bundle)
    assert linker.calibration.calibrator.trained_on == Calibrator.shipped(DEFAULT_ENCODER).trained_on
    top = [candidates[0].concept_id for candidates in linker.normalize(["heart attack", "fiebre alta"], 1)]
    assert top == ["HP:0001658", "HP:0001945"]
