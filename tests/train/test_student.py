"""Distilling a student: evenly spaced layers, a loss that falls, word embeddings left as they were."""

import pytest
import torch
from safetensors.torch import load_file

from babelink.encoders.transformer import EncoderSettings, TransformerEncoder
from babelink.errors import BabelinkError
from babelink.train.student import StudentConfig, StudentTrainer, kept_layers

NAMES = ["fever", "pyrexia", "fiebre", "headache", "cephalalgia", "asthma", "asma", "diabetes", "dm", "cough",
         "tos", "rash", "exantema", "anemia", "anaemia", "sepsis"]


def test_kept_layers_are_evenly_spaced_from_first_to_last():
    assert kept_layers(12, 3) == [0, 6, 11]  # round(5.5) is 6: banker's rounding
    assert kept_layers(12, 4) == [0, 4, 7, 11]
    assert kept_layers(12, 1) == [11] and kept_layers(2, 2) == [0, 1]
    with pytest.raises(BabelinkError, match="1 to 12 layers"):
        kept_layers(12, 13)


def test_the_student_learns_the_teachers_places(tiny_encoder_dir, tmp_path):
    config = StudentConfig(layers=1, batch_size=8, learning_rate=1e-3, max_steps=30, epochs=100, seed=3)
    trainer = StudentTrainer(tiny_encoder_dir, NAMES, tmp_path / "student", config)
    assert trainer.model.config.num_hidden_layers == 1
    trainer.model.eval()
    with torch.no_grad():
        before = trainer.loss(NAMES[:8]).item()
    out = trainer.train()
    trainer.model.eval()
    with torch.no_grad():
        assert trainer.loss(NAMES[:8]).item() < before
    student, teacher = load_file(str(out / "model.safetensors")), load_file(str(tiny_encoder_dir / "model.safetensors"))
    assert not any(name.startswith("encoder.layer.1.") for name in student)
    assert torch.equal(student["embeddings.word_embeddings.weight"], teacher["embeddings.word_embeddings.weight"])
    encoder = TransformerEncoder(out)
    assert encoder.model.config.num_hidden_layers == 1 and encoder.encode(["fever"]).shape == (1, encoder.dimension)
    with pytest.raises(BabelinkError, match="no names"):
        StudentTrainer(tiny_encoder_dir, [], tmp_path / "none", config)


def test_a_teacher_without_stored_settings_is_distilled_with_those_given(tiny_encoder_dir, tmp_path):
    """The bundled e5 is converted without `babelink_encoder.json`: its mean pooling and prefix are given."""
    settings = EncoderSettings(pooling="mean", prefix="query: ")
    config = StudentConfig(layers=1, batch_size=8, max_steps=1, seed=3)
    trainer = StudentTrainer(tiny_encoder_dir, NAMES, tmp_path / "student", config, settings=settings)
    assert trainer.teacher.settings == settings and trainer.student.settings == settings
    assert TransformerEncoder(trainer.train()).settings.prefix == "query: "


def test_the_student_trains_loss_scaled_in_fp16_as_on_a_gpu(tiny_encoder_dir, tmp_path):
    """fp16 autocast with a gradient scaler, the GPU's path, run on the CPU: finite losses, and
    the student's settings say `auto` so that each machine picks its own precision again."""
    settings = EncoderSettings(pooling="mean", precision="fp16")
    config = StudentConfig(layers=1, batch_size=8, max_steps=3, epochs=10, seed=3)
    trainer = StudentTrainer(tiny_encoder_dir, NAMES, tmp_path / "student", config, settings=settings)
    assert trainer.student.precision == "float16" and trainer.scaler.is_enabled()
    out = trainer.train()
    assert trainer.state.step == 3 and all(torch.isfinite(torch.tensor(trainer.state.loss_history)))
    assert TransformerEncoder(out).settings.precision == "auto"
