"""`link`'s screening search: where names are encoded on first need, spans are ranked over narrower
pools first, and only those that reach the link threshold are ranked in full."""

import pytest
from support import CountingEncoder, kb_of

from babelink.bundle.store import build_bundle, load_bundle
from babelink.index import approximate
from babelink.index.dense import DenseParams
from babelink.linker import Linker
from babelink.retrieve.candidate import ScreenedGenerator, deciding_at
from babelink.retrieve.generators import HybridParams
from babelink.retrieve.translation import TranslatingGenerator
from babelink.translate import Lexicon

#: Many names that share character n-grams, so that each TF-IDF pool holds more than a screening pool.
NAMES = {
    "C1": ["Asthma", "Asthma attack", "Bronchial asthma", "Asma bronquial"],
    "C2": ["Diabetes mellitus", "Diabetes insipidus nephrogenic", "Diabetic nephropathy"],
    "C3": ["Arterial hypertension", "Pulmonary hypertension", "Hipertensión arterial"],
    "C4": ["Myocardial infarction", "Heart attack", "Infarto de miocardio"],
    **{f"D{number}": [f"{stem} {kind}"] for number, (stem, kind) in enumerate(
        (stem, kind) for stem in ("asthmatic", "diabetic", "hypertensive", "cardiac", "renal", "hepatic", "ocular",
                                  "cerebral", "spinal", "gastric", "hemorrhagic", "vascular")
        for kind in ("crisis", "disorder", "disease", "syndrome", "failure", "injury", "lesion", "cyst", "tumour"))},
}
TEXT = "Asthma and diabetes mellitus, then arterial hypertension; no cardiac syndrome wording here."


@pytest.fixture(autouse=True)
def names_encoded_on_first_need_only(monkeypatch):
    """These tests count the names a search encodes; a build's fit would have encoded them all."""
    monkeypatch.setattr(approximate, "FIT_NAMES", 0)


@pytest.fixture
def kb():
    return kb_of(NAMES)


def _linked(bundle_path, home, monkeypatch):
    """The mentions of TEXT linked from a fresh name store, and the KB names encoded for them."""
    monkeypatch.setenv("BABELINK_HOME", str(home))
    bundle = load_bundle(bundle_path)
    counting = CountingEncoder(bundle.encoder())
    linker = Linker(bundle, encoder=counting)
    found = [(m.start, m.end, [(c.concept_id, round(c.score, 5)) for c in m.candidates])
             for m in linker.link(TEXT).mentions]
    return found, set(counting.texts) & set(bundle.names.strings)


def test_screening_links_what_the_full_search_links_encoding_fewer_names(kb, tmp_path, monkeypatch,
                                                                         contextual_encoder_dir):
    lazy = DenseParams(kind="lazy")
    screened = build_bundle(kb, tmp_path / "screened", encoder=contextual_encoder_dir, dense_params=lazy,
                            hybrid_params=HybridParams(pool=12, screening_pool=2))
    unscreened = build_bundle(kb, tmp_path / "full", encoder=contextual_encoder_dir, dense_params=lazy,
                              hybrid_params=HybridParams(pool=12, screening_pool=12))
    found, encoded = _linked(screened, tmp_path / "home-screened", monkeypatch)
    want, encoded_in_full = _linked(unscreened, tmp_path / "home-full", monkeypatch)
    assert found == want and {candidates[0][0] for *_, candidates in found} >= {"C1", "C2", "C3"}
    assert encoded <= encoded_in_full


def test_a_screened_answer_is_the_full_one_at_the_threshold_and_the_screens_best_below(kb, tmp_path, monkeypatch,
                                                                                        contextual_encoder_dir):
    monkeypatch.setenv("BABELINK_HOME", str(tmp_path / "home"))
    bundle = load_bundle(build_bundle(kb, tmp_path / "b", encoder=contextual_encoder_dir,
                                      dense_params=DenseParams(kind="lazy"),
                                      hybrid_params=HybridParams(pool=12, screening_pool=2)))
    counting = CountingEncoder(bundle.encoder())
    full = Linker(bundle, encoder=counting).generator
    screened = deciding_at(full, 0.99)
    assert isinstance(screened, ScreenedGenerator)
    mentions = ["cardiac crisis of the kidney", "asthma"]
    approximate, exact = screened.generate(mentions, 4)
    screened_names = set(counting.texts) - set(mentions)
    assert exact == full.generate(mentions[1:], 4)[0]
    [best, *_] = full.generate(mentions[:1], 4)[0]
    assert len(approximate) == 1 and approximate[0].score <= best.score < 0.99
    assert len(screened_names) < len(set(counting.texts) - set(mentions))  # the full search encoded more
    assert deciding_at(screened.screen, 0.99) is screened.screen  # a screen is not screened again


def test_no_screening_where_name_vectors_are_stored(kb, tmp_path, contextual_encoder_dir):
    bundle = load_bundle(build_bundle(kb, tmp_path / "flat", encoder=contextual_encoder_dir,
                                      dense_params=DenseParams(kind="flat")))
    assert not isinstance(deciding_at(Linker(bundle).generator, 0.98), ScreenedGenerator)


def test_a_translating_generator_screens_through_its_base(kb, tmp_path, contextual_encoder_dir):
    bundle = load_bundle(build_bundle(kb, tmp_path / "b", encoder=contextual_encoder_dir,
                                      dense_params=DenseParams(kind="lazy"),
                                      translations=Lexicon({"es": {"asma": ("asthma",)}})))
    translating = Linker(bundle).generator
    assert isinstance(translating, TranslatingGenerator)
    screened = deciding_at(translating, 0.99)
    assert isinstance(screened, ScreenedGenerator) and isinstance(screened.screen, TranslatingGenerator)
    assert screened.screen.confident == screened.full.confident == 0.99
    [found] = screened.generate(["asma"], 3, langs=["es"])  # rendered "asthma", a name: the full answer
    assert found[0].score >= 0.99 and found == translating.generate(["asma"], 3, langs=["es"])[0]
