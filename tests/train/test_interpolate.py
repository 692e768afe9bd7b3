import json

import pytest
import torch
from safetensors.torch import load_file
from transformers import BertConfig, BertModel

from babelink.encoders.transformer import TransformerEncoder
from babelink.errors import BabelinkError
from babelink.train.interpolate import RECORD_FILE, interpolate_checkpoints


@pytest.fixture()
def shifted_dir(tiny_encoder_dir, tmp_path):
    """The tiny BERT with every float parameter moved by +1: a stand-in 'fine-tuned' checkpoint."""
    model = BertModel.from_pretrained(tiny_encoder_dir, add_pooling_layer=False)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter += 1.0
    out = tmp_path / "shifted"
    model.save_pretrained(out)
    for item in tiny_encoder_dir.iterdir():
        if "token" in item.name:
            (out / item.name).write_bytes(item.read_bytes())
    return out


def _weights(path):
    return load_file(path / "model.safetensors")


@pytest.mark.parametrize("weight", [0.0, 0.25, 1.0])
def test_interpolation_mixes_every_float_parameter(tiny_encoder_dir, shifted_dir, tmp_path, weight):
    out = interpolate_checkpoints(tiny_encoder_dir, shifted_dir, weight, tmp_path / "mixed")
    start, end, mixed = _weights(tiny_encoder_dir), _weights(shifted_dir), _weights(out)
    assert mixed.keys() == end.keys()
    for name, value in mixed.items():
        expected = start[name] + weight * (end[name] - start[name]) if value.is_floating_point() else end[name]
        torch.testing.assert_close(value, expected, rtol=0, atol=1e-6)
    assert json.loads((out / RECORD_FILE).read_text())["weight"] == weight
    assert TransformerEncoder(out).encode(["asthma"]).shape == (1, 32)  # a loadable encoder, tokenizer copied


def test_different_architectures_are_refused_by_name(tiny_encoder_dir, tmp_path):
    other = tmp_path / "three-layers"
    BertModel(BertConfig(**{**BertConfig.from_pretrained(tiny_encoder_dir).to_dict(), "num_hidden_layers": 3}),
              add_pooling_layer=False).save_pretrained(other)
    with pytest.raises(BabelinkError, match="not the same architecture.*encoder.layer.2"):
        interpolate_checkpoints(tiny_encoder_dir, other, 0.5, tmp_path / "mixed")
    assert not (tmp_path / "mixed").exists()


def test_missing_checkpoint_and_bad_weight_are_clear_errors(tiny_encoder_dir, tmp_path):
    with pytest.raises(BabelinkError, match="nowhere: not a checkpoint directory"):
        interpolate_checkpoints(tmp_path / "nowhere", tiny_encoder_dir, 0.5, tmp_path / "mixed")
    with pytest.raises(BabelinkError, match="between 0 and 1"):
        interpolate_checkpoints(tiny_encoder_dir, tiny_encoder_dir, 1.5, tmp_path / "mixed")
