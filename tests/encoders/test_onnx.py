"""The ONNX runtime: the torch encoder's vectors without importing torch, exported once per checkpoint."""

from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from babelink.bundle.store import build_bundle
from babelink.encoders import open_encoder
from babelink.encoders.onnx import export_directory
from babelink.errors import BabelinkError, BundleError
from babelink.kb.base import KnowledgeBaseBuilder
from babelink.linker import Linker
from babelink.translate import read_lexicons

TEXTS = ["asthma", "diabetes mellitus type 2", "", "fièvre aiguë", "ü", "a" * 80, "myocardial infarction"]


@pytest.fixture(autouse=True)
def home(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("BABELINK_HOME", str(tmp_path_factory.getbasetemp() / "onnx-home"))


@pytest.mark.parametrize("settings", [{}, {"pooling": "mean", "prefix": "query: ", "max_length": 6, "batch_size": 2}])
def test_vectors_are_the_torch_encoders(tiny_encoder_dir, settings):
    by_torch = open_encoder(tiny_encoder_dir, precision="fp32", **settings)
    by_onnx = open_encoder(tiny_encoder_dir, runtime="onnx", precision="fp32", **settings)
    expected, found = by_torch.encode(TEXTS), by_onnx.encode(TEXTS)
    assert found.dtype == np.float32 and found.shape == expected.shape
    np.testing.assert_allclose(np.linalg.norm(found, axis=1), 1.0, rtol=1e-5)
    assert (found * expected).sum(axis=1).min() > 0.9999
    assert by_onnx.describe() == by_torch.describe()  # a bundle built by one is queried by the other
    assert by_onnx.encode([]).shape == (0, by_torch.dimension)


def test_the_export_is_made_once_per_checkpoint(tiny_encoder_dir, tmp_path):
    open_encoder(tiny_encoder_dir, runtime="onnx")
    export = export_directory(tiny_encoder_dir)
    made = (export / "body.onnx").stat().st_mtime_ns
    open_encoder(tiny_encoder_dir, runtime="onnx")
    assert (export / "body.onnx").stat().st_mtime_ns == made
    retrained = tmp_path / "retrained"
    shutil.copytree(tiny_encoder_dir, retrained)
    weights = load_file(retrained / "model.safetensors")
    save_file({key: value + 0.01 for key, value in weights.items()}, str(retrained / "model.safetensors"))
    assert export_directory(retrained) != export  # its own export, not the stale one
    assert not np.allclose(open_encoder(retrained, runtime="onnx").encode(["asthma"]),
                           open_encoder(tiny_encoder_dir, runtime="onnx").encode(["asthma"]))


def test_wrong_paths_and_runtimes_are_clear_errors(tmp_path):
    with pytest.raises(BabelinkError, match="not a transformers checkpoint"):
        open_encoder(tmp_path / "missing", runtime="onnx")
    with pytest.raises(BabelinkError, match="runtime must be one of torch, onnx"):
        open_encoder(tmp_path, runtime="tensorflow")


def test_a_bundle_answers_alike_in_both_runtimes_and_onnx_never_imports_torch_or_pandas(tiny_encoder_dir, tmp_path):
    builder = KnowledgeBaseBuilder()
    for concept_id, name in [("C1", "asthma"), ("C2", "diabetes"), ("C3", "fever"), ("C4", "gout")]:
        builder.add_name(concept_id, name)
    (tmp_path / "en-es.tsv").write_text("fever\tfiebre\n", encoding="utf-8")
    path = build_bundle(builder.build(), tmp_path / "b", retriever="dense", encoder=tiny_encoder_dir,
                        translations=read_lexicons([tmp_path / "en-es.tsv"]))
    queries = ["asthma", "diabetis", "gut", "fevers"]
    by_torch = Linker.open(path).normalize(queries, top_k=4)
    by_onnx = Linker.open(path, runtime="onnx").normalize(queries, top_k=4)
    assert [[(c.concept_id, round(c.score, 4)) for c in found] for found in by_onnx] == [
        [(c.concept_id, round(c.score, 4)) for c in found] for found in by_torch]
    script = ("import sys; from babelink.linker import Linker;"
              f"Linker.open({str(path)!r}, runtime='onnx').normalize(['asthma', 'fiebre alta']);"
              "assert not {'torch', 'transformers', 'sklearn', 'pandas'} & set(sys.modules), 'imported'")
    subprocess.run([sys.executable, "-c", script], check=True)


def test_a_changed_checkpoint_is_refused_in_the_onnx_runtime_too(tiny_encoder_dir, tmp_path):
    checkpoint = tmp_path / "encoder"
    shutil.copytree(tiny_encoder_dir, checkpoint)
    builder = KnowledgeBaseBuilder()
    builder.add_name("C1", "asthma")
    path = build_bundle(builder.build(), tmp_path / "b", retriever="dense", encoder=checkpoint)
    with torch.no_grad():
        weights = load_file(checkpoint / "model.safetensors")
        save_file({key: value * 1.5 for key, value in weights.items()}, str(checkpoint / "model.safetensors"))
    with pytest.raises(BundleError, match="fingerprint differs"):
        Linker.open(path, runtime="onnx")


def test_int8_runs_in_onnx_runtime_and_a_bundle_built_in_int8_is_queried_in_int8(tiny_encoder_dir, tmp_path):
    from babelink.encoders.onnx import OnnxEncoder
    from babelink.encoders.transformer import EncoderSettings, TransformerEncoder

    int8 = open_encoder(tiny_encoder_dir, precision="int8")  # whichever runtime is asked for
    assert isinstance(int8, OnnxEncoder) and int8.describe()["precision"] == "int8"
    full = open_encoder(tiny_encoder_dir, precision="fp32").encode(TEXTS)
    quantised = int8.encode(TEXTS)
    np.testing.assert_allclose(np.linalg.norm(quantised, axis=1), 1.0, rtol=1e-5)
    assert 0.9 < (quantised * full).sum(axis=1).min() and not np.allclose(quantised, full, atol=1e-6)
    with pytest.raises(BabelinkError, match="ONNX Runtime"):
        TransformerEncoder(tiny_encoder_dir, EncoderSettings(precision="int8"))
    builder = KnowledgeBaseBuilder()
    for concept_id, name in [("C1", "asthma"), ("C2", "diabetes"), ("C3", "fever"), ("C4", "gout")]:
        builder.add_name(concept_id, name)
    path = build_bundle(builder.build(), tmp_path / "b", retriever="dense", encoder=tiny_encoder_dir,
                        encoder_settings={"precision": "int8"})
    linker = Linker.open(path)
    assert linker.bundle.manifest["dense"]["encoder"]["precision"] == "int8"
    assert isinstance(linker.encoder.encoder, OnnxEncoder)
    found = linker.normalize(["asthma", "diabetes", "fever", "gout"], top_k=1)
    assert [c[0].concept_id for c in found] == ["C1", "C2", "C3", "C4"]
    assert min(c[0].score for c in found) > 0.9999  # names and queries share the int8 space


def test_a_damaged_export_is_made_again_or_named(tiny_encoder_dir):
    open_encoder(tiny_encoder_dir, runtime="onnx")
    export = export_directory(tiny_encoder_dir)
    (export / "word_embeddings.npy").unlink()  # incomplete: exported again
    assert open_encoder(tiny_encoder_dir, runtime="onnx").encode(["asthma"]).shape == (1, 32)
    (export / "tokenizer.json").write_text("{")  # parsed on first use: the error comes then
    encoder = open_encoder(tiny_encoder_dir, runtime="onnx")
    with pytest.raises(BabelinkError, match="damaged ONNX export.*remove that directory"):
        encoder.encode(["asthma"])
    (export / "body.onnx").write_bytes(b"not a graph")
    with pytest.raises(BabelinkError, match="damaged ONNX export.*remove that directory"):
        open_encoder(tiny_encoder_dir, runtime="onnx")
    shutil.rmtree(export)
