"""A bundle's own calibrator: fitted on annotated documents, stored in the bundle, used by its linker."""

from __future__ import annotations

import json
import os
from dataclasses import replace

import pytest
from support import babelink, build_sparse_bundle

from babelink.bundle.integrity import MANIFEST
from babelink.bundle.store import load_bundle
from babelink.bundle.update import store_calibrator
from babelink.errors import InvalidInputError
from babelink.formats.document import Annotation, Document
from babelink.linker import Linker
from babelink.retrieve.calibration import CALIBRATION_FILE, Calibrator
from babelink.train.calibration import TOP_K, fit_calibrator, link_proposals, link_rows, normalize_rows

NAMES = {"C1": ["Asthma", "Asthmatic attack"], "C2": ["Diabetes mellitus", "Diabetes"], "C3": ["Hypertension"],
         "C4": ["Fever", "Pyrexia"], "C5": ["Heart attack", "Myocardial infarction"]}
TEXTS = ["The patient had asthma and a fever.", "Diabetes mellitus with hypertension; no heart attack.",
         "Pyrexia after an asthmatic attack.", "Her diabetes was treated."]
GOLD = [[("asthma", "C1")], [("Diabetes mellitus", "C2"), ("hypertension", "C3")],
        [("Pyrexia", "C4"), ("asthmatic attack", "C1")], [("diabetes", "C9")]]  # C9: not in the KB (NIL)


def documents() -> list[Document]:
    found = []
    for number, (text, gold) in enumerate(zip(TEXTS, GOLD)):
        annotations = tuple(Annotation(text.index(mention), text.index(mention) + len(mention), mention, (concept,),
                                       "Disease") for mention, concept in gold)
        found.append(Document(str(number), text, annotations, lang="en"))
    return found


@pytest.fixture
def bundle(tmp_path):
    return build_sparse_bundle(NAMES, tmp_path / "bundle")


def test_rows_label_candidates_against_the_gold(bundle):
    linker = Linker.open(bundle)
    rows = list(normalize_rows(linker, [("asthma", ["C1"], "en"), ("diabetes", ["C9"], None), ("!!", ["C1"], None)]))
    features, labels = rows[0]
    assert features.shape[0] == labels.shape[0] <= TOP_K and labels[0] == 1 and labels[1:].sum() == 0
    assert rows[1][1].sum() == 0  # gold outside the KB: every candidate wrong (a NIL example)
    assert rows[2] is None  # nothing to search
    docs = documents()
    proposals = link_proposals(linker, docs)
    spans = {(d.id, p.text): labels for d, found in zip(docs, proposals) for p, (_, labels) in
             zip(found, link_rows(linker, [d], [found]))}
    assert spans["0", "asthma"][0] == 1 and spans["0", "fever"].sum() == 0  # "fever" is not annotated there


def test_a_fitted_calibrator_is_stored_in_the_bundle_and_used(bundle):
    calibrator = fit_calibrator(Linker.open(bundle), documents())
    assert calibrator.trained_on == {"documents": 4, "mentions": 6, "spans": calibrator.trained_on["spans"],
                                     "languages": {"en": 4}} and calibrator.trained_on["spans"] > 0
    shipped = Linker.open(bundle).normalize("asthmatic", top_k=2)
    before = {path.name: os.stat(path).st_ino for path in (bundle / "sparse").iterdir()}
    store_calibrator(bundle, calibrator)
    loaded = load_bundle(bundle, verify=True)
    assert loaded.manifest["calibration"] == calibrator.trained_on and CALIBRATION_FILE in loaded.manifest["files"]
    assert {path.name: os.stat(path).st_ino for path in (bundle / "sparse").iterdir()} == before  # linked, not copied
    own = Linker.open(bundle).normalize("asthmatic", top_k=2)
    expected = calibrator.probabilities("normalize", "asthmatic", [replace(c, probability=None) for c in own],
                                        loaded.scripts)
    assert own[0].probability == pytest.approx(expected[0])  # the best's features read the second's score
    assert [c.probability for c in own] != pytest.approx([c.probability for c in shipped])
    assert Calibrator.load(bundle / CALIBRATION_FILE).trained_on == calibrator.trained_on


def test_documents_without_both_right_and_wrong_answers_are_a_clear_error(bundle):
    with pytest.raises(InvalidInputError, match="no annotation with a concept id"):
        fit_calibrator(Linker.open(bundle), [Document("x", "asthma")])


def test_cli_train_calibrator(bundle, tmp_path):
    pubtator = tmp_path / "dev.txt"
    pubtator.write_text("".join(
        f"{d.id}|t|{d.text}\n{d.id}|a|\n"
        + "".join(f"{d.id}\t{a.start}\t{a.end}\t{a.text}\tDisease\t{a.concept_ids[0]}\n" for a in d.annotations)
        + "\n" for d in documents()), encoding="utf-8")
    result = babelink("train", "calibrator", "--bundle", bundle, "--dev", pubtator)
    assert result.returncode == 0, result.stderr
    assert "fitted on 6 mentions" in result.stderr
    assert json.loads((bundle / MANIFEST).read_text())["calibration"]["documents"] == 4
    nothing = babelink("train", "calibrator", "--bundle", bundle, "--dev", pubtator, "--types", "Chemical")
    assert nothing.returncode != 0 and "Traceback" not in nothing.stderr
    assert f"{pubtator}: 4 documents and no annotation of the types Chemical with a concept id" in nothing.stderr
    empty = tmp_path / "empty.txt"
    empty.write_text("", encoding="utf-8")
    failed = babelink("train", "calibrator", "--bundle", bundle, "--dev", pubtator, "--dev", empty)
    assert failed.returncode != 0 and f"{empty}: " in failed.stderr and "Traceback" not in failed.stderr
