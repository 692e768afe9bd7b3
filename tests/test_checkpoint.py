import shutil

import pytest
from safetensors.torch import load_file, save_file

from babelink.checkpoint import load_pretrained
from babelink.errors import BabelinkError


def test_a_checkpoint_without_a_pooler_loads_without_transformers_load_report(tiny_encoder_dir, capfd):
    model = load_pretrained(tiny_encoder_dir)
    assert model.config.hidden_size == 32
    assert "LOAD REPORT" not in capfd.readouterr().err


def test_a_checkpoint_missing_a_layer_weight_is_an_error_naming_it(tiny_encoder_dir, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(tiny_encoder_dir, broken)
    weights = load_file(broken / "model.safetensors")
    key = next(key for key in weights if "layer.1.attention" in key)
    del weights[key]
    save_file(weights, broken / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(BabelinkError, match="an incomplete checkpoint, missing ") as raised:
        load_pretrained(broken)
    assert str(broken) in str(raised.value) and str(raised.value).endswith(key)


def test_a_directory_without_a_checkpoint_is_an_error_naming_it(tmp_path):
    with pytest.raises(BabelinkError, match="cannot load the checkpoint") as raised:
        load_pretrained(tmp_path)
    assert str(tmp_path) in str(raised.value)


def test_a_trained_model_may_miss_nothing(tiny_encoder_dir):
    with pytest.raises(BabelinkError, match="missing pooler.dense.bias, pooler.dense.weight"):
        load_pretrained(tiny_encoder_dir, fresh=frozenset())
