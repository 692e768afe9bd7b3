"""Loading a checkpoint: the direct safetensors path gives the very model `from_pretrained` gives,
and a checkpoint it does not fit (extra pooler weights, another dtype) still loads."""

import shutil

import pytest
import torch
from transformers import AutoModel, BertConfig, BertModel

from babelink.encoders.transformer import TransformerEncoder, _from_pretrained, _load_safetensors_directly


def _same_weights(first, second) -> bool:
    one, two = first.state_dict(), second.state_dict()
    return one.keys() == two.keys() and all(torch.equal(one[key], two[key]) for key in one)


def test_direct_load_is_the_from_pretrained_model(tiny_encoder_dir):
    direct = _load_safetensors_directly(AutoModel, tiny_encoder_dir)
    assert direct is not None
    assert _same_weights(direct, _from_pretrained(AutoModel, tiny_encoder_dir))
    assert torch.equal(direct.embeddings.position_ids[0, :4], torch.arange(4))  # buffers built, not left empty


@pytest.mark.parametrize("change", ["pooler", "bf16"])
def test_checkpoints_the_direct_path_does_not_fit_still_load(tiny_encoder_dir, tmp_path, change):
    path = tmp_path / change
    shutil.copytree(tiny_encoder_dir, path)
    config = BertConfig.from_pretrained(path)
    torch.manual_seed(1)
    model = BertModel(config, add_pooling_layer=change == "pooler")
    (model.to(torch.bfloat16) if change == "bf16" else model).save_pretrained(path)
    assert _load_safetensors_directly(AutoModel, path) is None
    vectors = TransformerEncoder(path).encode(["asthma", "fiebre"])
    assert vectors.shape == (2, 32) and abs(float((vectors[0] ** 2).sum()) - 1.0) < 1e-4
