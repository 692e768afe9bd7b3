"""Encoder artefacts: LoRA adapters and students applied to their base, the size limit, wrong bases refused."""

import json
import subprocess
import sys

import pytest
import torch
from safetensors.torch import load_file, save_file

from babelink.encoders.artefacts import (
    LORA_A,
    LORA_B,
    MAX_BYTES,
    apply_artefact,
    merge_lora,
    read_manifest,
    write_artefact,
)
from babelink.encoders.transformer import TransformerEncoder
from babelink.errors import BabelinkError

BASE_SHA = "a" * 64
MODULE = "encoder.layer.0.attention.self.query"


def manifest(**extra):
    return {"name": "toy", "kind": "lora", "base": {"name": "tiny", "sha256": BASE_SHA},
            "settings": {"pooling": "mean"}, "training": {"steps": 1}, **extra}


def test_merge_adds_the_low_rank_product():
    state = {MODULE + ".weight": torch.ones(4, 3)}
    down, up = torch.randn(2, 3), torch.randn(4, 2)
    merge_lora(state, {MODULE + LORA_A: down, MODULE + LORA_B: up})
    assert torch.allclose(state[MODULE + ".weight"], 1 + up @ down)
    with pytest.raises(BabelinkError, match="no .* weight of that name"):
        merge_lora({}, {MODULE + LORA_A: down, MODULE + LORA_B: up})


def test_a_lora_artefact_applies_to_its_base_only(tiny_encoder_dir, tmp_path):
    hidden = json.loads((tiny_encoder_dir / "config.json").read_text())["hidden_size"]
    adapters = {MODULE + LORA_A: torch.randn(2, hidden), MODULE + LORA_B: torch.randn(hidden, 2)}
    artefact = tmp_path / "toy.safetensors"
    write_artefact(artefact, manifest(), adapters)
    assert read_manifest(artefact)["base"]["sha256"] == BASE_SHA
    apply_artefact(artefact, tiny_encoder_dir, BASE_SHA, tmp_path / "applied")
    base, applied = load_file(str(tiny_encoder_dir / "model.safetensors")), load_file(
        str(tmp_path / "applied" / "model.safetensors"))
    expected = base[MODULE + ".weight"] + adapters[MODULE + LORA_B] @ adapters[MODULE + LORA_A]
    assert torch.allclose(applied[MODULE + ".weight"], expected)
    assert all(torch.equal(applied[name], tensor) for name, tensor in base.items() if name != MODULE + ".weight")
    assert TransformerEncoder(tmp_path / "applied").settings.pooling == "mean"
    with pytest.raises(BabelinkError, match="trained on base encoder aaaaaaaaaaaa"):
        apply_artefact(artefact, tiny_encoder_dir, "b" * 64, tmp_path / "elsewhere")
    assert not (tmp_path / "elsewhere").exists()


def test_a_student_artefact_takes_the_bases_word_embeddings(tiny_encoder_dir, tmp_path):
    base = load_file(str(tiny_encoder_dir / "model.safetensors"))
    student = {name: tensor.half() for name, tensor in base.items()
               if name != "embeddings.word_embeddings.weight" and not name.startswith("encoder.layer.1.")}
    artefact = tmp_path / "student.safetensors"
    write_artefact(artefact, manifest(kind="student", layers=1), student)
    apply_artefact(artefact, tiny_encoder_dir, BASE_SHA, tmp_path / "applied")
    encoder = TransformerEncoder(tmp_path / "applied")
    assert encoder.model.config.num_hidden_layers == 1
    assert encoder.encode(["fever"]).shape == (1, encoder.dimension)


def test_oversized_and_foreign_files_are_refused(tmp_path):
    with pytest.raises(BabelinkError, match="over the 16 MiB"):
        write_artefact(tmp_path / "big.safetensors", manifest(), {"x": torch.zeros(MAX_BYTES // 4 + 1)})
    assert not (tmp_path / "big.safetensors").exists()
    save_file({"x": torch.zeros(2)}, str(tmp_path / "plain.safetensors"))
    with pytest.raises(BabelinkError, match="plain.safetensors: not a babelink encoder artefact"):
        read_manifest(tmp_path / "plain.safetensors")
    (tmp_path / "junk.safetensors").write_bytes(b"\x00" * 10)
    with pytest.raises(BabelinkError, match="junk.safetensors: not a readable safetensors file"):
        read_manifest(tmp_path / "junk.safetensors")
    with pytest.raises(BabelinkError, match="kind"):
        write_artefact(tmp_path / "odd.safetensors", manifest(kind="odd"), {"x": torch.zeros(2)})


def test_info_shows_an_artefacts_terms(tmp_path):
    import json as json_module

    from support import babelink

    artefact = tmp_path / "muse.safetensors"
    muse = manifest(training={"steps": 3, "default_eligible": False, "sources": {"muse": "CC BY-NC 4.0"}})
    write_artefact(artefact, muse, {"x": torch.zeros(2)})
    shown = babelink("info", "--encoder", artefact)
    assert shown.returncode == 0, shown.stderr
    body = json_module.loads(shown.stdout)
    assert body["terms"] == ("opt-in: its training data's terms restrict its use to non-commercial ends: "
                             "muse (CC BY-NC 4.0)")
    assert body["manifest"]["training"]["steps"] == 3
    missing = babelink("info", "--encoder", "e5-nothing")
    assert missing.returncode == 1 and "no trained encoder named 'e5-nothing'" in missing.stderr


def test_only_a_non_commercial_licence_is_called_so():
    from babelink.encoders.artefacts import terms

    def training(licence):
        return {"training": {"default_eligible": False, "sources": {"corpus": licence}}}

    assert terms(training("custom terms of the NCBI")).endswith("restrict its use: corpus (custom terms of the NCBI)")
    assert "to non-commercial ends" in terms(training("CC-BY-NC-SA-4.0"))



def test_a_packaged_artefacts_manifest_is_read_without_torch():
    """The ONNX runtime's start-up (a mention on the command line) opens the default's trained
    encoder by name: reading its manifest must not pull PyTorch in."""
    script = ("import sys; from babelink.encoders.artefacts import packaged, read_manifest;"
              "assert all(read_manifest(path)['kind'] for path in packaged().values());"
              "assert 'torch' not in sys.modules, 'imported torch'")
    subprocess.run([sys.executable, "-c", script], check=True)
