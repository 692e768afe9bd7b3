"""SAP training loop on a tiny random BERT: the loss falls, resuming is bit-identical."""

import json
import math
from dataclasses import replace

import pytest
import torch
from safetensors.torch import load_file

from babelink.encoders.transformer import EncoderSettings, TransformerEncoder
from babelink.errors import BabelinkError
from babelink.train.pairs import PositivePair, positive_pairs
from babelink.train.sap import SapConfig, SapTrainer

CONCEPTS = {
    "C1": ["fever", "pyrexia", "fiebre", "high temperature"],
    "C2": ["headache", "cephalalgia", "dolor de cabeza", "head pain"],
    "C3": ["asthma", "asma", "bronchial asthma", "asthmatic"],
    "C4": ["diabetes", "diabetes mellitus", "sugar disease", "dm"],
}
PAIRS = positive_pairs([(name, concept) for concept, names in CONCEPTS.items() for name in names])
SETTINGS = EncoderSettings(pooling="mean", precision="fp32")
CONFIG = SapConfig(learning_rate=1e-3, batch_pairs=8, epochs=20, max_steps=20, warmup_ratio=0.1,
                   epsilon=0.5, checkpoint_every=10, seed=7)


def _weights(directory):
    return load_file(str(directory / "model.safetensors"))


def test_twenty_steps_lower_the_loss_and_write_a_loadable_encoder(tiny_encoder_dir, tmp_path):
    trainer = SapTrainer(tiny_encoder_dir, PAIRS, tmp_path / "out", CONFIG, SETTINGS)
    before = trainer.loss(PAIRS[:24]).item()
    out = trainer.train()
    history = trainer.state.loss_history
    assert trainer.state.step == 20 and len(history) == 20
    assert sum(history[-5:]) / 5 < sum(history[:5]) / 5
    trainer.model.eval()
    assert trainer.loss(PAIRS[:24]).item() < before
    encoder = TransformerEncoder(out)  # settings come from babelink_encoder.json
    assert encoder.settings.pooling == "mean"
    vectors = encoder.encode(["fever", "pyrexia", "asthma"])
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]
    assert json.loads((out / "sap_config.json").read_text())["steps"] == 20


class Killed(Exception):
    pass


def _kill_after(step):
    def progress(state, seconds):
        if state.step == step:
            raise Killed

    return progress


def test_resume_after_a_kill_continues_bit_identically(tiny_encoder_dir, tmp_path):
    SapTrainer(tiny_encoder_dir, PAIRS, tmp_path / "straight", CONFIG, SETTINGS).train()
    with pytest.raises(Killed):  # dies at step 12; the last resume point is step 10
        SapTrainer(tiny_encoder_dir, PAIRS, tmp_path / "resumed", CONFIG, SETTINGS).train(_kill_after(12))
    second = SapTrainer(tiny_encoder_dir, PAIRS, tmp_path / "resumed", CONFIG, SETTINGS)
    assert second.state.step == 10
    second.train()
    straight, resumed = _weights(tmp_path / "straight"), _weights(tmp_path / "resumed")
    assert straight.keys() == resumed.keys()
    for name in straight:
        assert torch.equal(straight[name], resumed[name]), name


def test_frozen_embeddings_stay_put_and_resume_needs_the_same_data(tiny_encoder_dir, tmp_path):
    config = SapConfig(learning_rate=1e-3, batch_pairs=8, max_steps=3, freeze_embeddings=True)
    trainer = SapTrainer(tiny_encoder_dir, PAIRS, tmp_path / "out", config, SETTINGS)
    embeddings = trainer.model.get_input_embeddings().weight.detach().clone()
    trainer.train()
    assert torch.equal(trainer.model.get_input_embeddings().weight, embeddings)
    with pytest.raises(BabelinkError, match="resume with the same data"):
        SapTrainer(tiny_encoder_dir, PAIRS[:10], tmp_path / "out", config, SETTINGS)
    with pytest.raises(BabelinkError, match="no positive pairs"):
        SapTrainer(tiny_encoder_dir, [], tmp_path / "other", config, SETTINGS)
    assert isinstance(PAIRS[0], PositivePair)


def test_evaluation_keeps_the_best_checkpoint(tiny_encoder_dir, tmp_path):
    scores = iter([0.4, 0.5, 0.9, 0.7])
    config = SapConfig(learning_rate=1e-3, batch_pairs=8, max_steps=15, epochs=20)
    trainer = SapTrainer(tiny_encoder_dir, PAIRS, tmp_path / "out", config, SETTINGS)
    out = trainer.train(evaluate=lambda encoder: next(scores), eval_every=5)
    assert trainer.state.evaluations == [(0, 0.4), (5, 0.5), (10, 0.9), (15, 0.7)], "the starting point is scored too"
    assert json.loads((out / "sap_config.json").read_text())["steps"] == 10
    best = _weights(out / "best")
    for name, tensor in _weights(out).items():
        assert torch.equal(tensor, best[name])


def test_loss_scaled_fp16_training_runs_as_on_a_gpu(tiny_encoder_dir, tmp_path):
    """A GPU trains under fp16 autocast with a gradient scaler ("auto" there); the CPU runs the same
    path when asked for fp16, so the scaler's steps and its resume state are checked without one."""
    config = SapConfig(batch_pairs=8, max_steps=4, epochs=10, checkpoint_every=2)
    settings = EncoderSettings(pooling="mean", precision="fp16")
    trainer = SapTrainer(tiny_encoder_dir, PAIRS, tmp_path / "out", config, settings)
    assert trainer.encoder.precision == "float16" and trainer.scaler.is_enabled()
    trainer.train()
    assert trainer.state.step == 4 and all(math.isfinite(loss) for loss in trainer.state.loss_history)
    resumed = SapTrainer(tiny_encoder_dir, PAIRS, tmp_path / "out", replace(config, max_steps=6), settings)
    assert resumed.state.step == 4 and resumed.scaler.state_dict() == trainer.scaler.state_dict()  # growth tracker too
    resumed.train()
    assert resumed.state.step == 6 and all(math.isfinite(loss) for loss in resumed.state.loss_history)


def test_lora_trains_adapters_only_and_writes_them_beside_the_merged_checkpoint(tiny_encoder_dir, tmp_path):
    from babelink.train.sap import LORA_FILE

    config = replace(CONFIG, lora_rank=4, checkpoint_every=10)
    trainer = SapTrainer(tiny_encoder_dir, PAIRS, tmp_path / "lora", config, SETTINGS)
    trainable = {name for name, parameter in trainer.model.named_parameters() if parameter.requires_grad}
    assert trainable and all("lora_" in name for name in trainable)
    out = trainer.train()
    trainer.model.eval()
    texts = ["fever", "dolor de cabeza"]
    with torch.no_grad():
        adapted = trainer.encoder.encode(texts)
    merged = TransformerEncoder(out).encode(texts)  # the merged checkpoint computes what the adapters do
    assert abs(merged - adapted).max() < 1e-4  # float32 rounding: W·x + B·(A·x) against (W + B·A)·x
    base, trained = _weights(tiny_encoder_dir), _weights(out)
    assert base.keys() == trained.keys()
    assert torch.equal(base["embeddings.word_embeddings.weight"], trained["embeddings.word_embeddings.weight"])
    adapters = load_file(str(out / LORA_FILE))
    assert len(adapters) == 2 * 2 * 6  # A and B of q, k, v, attention output, intermediate, output in 2 layers


def test_lora_resumes_bit_identically(tiny_encoder_dir, tmp_path):
    config = replace(CONFIG, lora_rank=4, checkpoint_every=10)
    SapTrainer(tiny_encoder_dir, PAIRS, tmp_path / "straight", config, SETTINGS).train()
    with pytest.raises(Killed):
        SapTrainer(tiny_encoder_dir, PAIRS, tmp_path / "resumed", config, SETTINGS).train(_kill_after(12))
    second = SapTrainer(tiny_encoder_dir, PAIRS, tmp_path / "resumed", config, SETTINGS)
    assert second.state.step == 10
    second.train()
    straight, resumed = _weights(tmp_path / "straight"), _weights(tmp_path / "resumed")
    for name in straight:
        assert torch.equal(straight[name], resumed[name]), name
