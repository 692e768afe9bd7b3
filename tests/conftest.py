"""Shared test fixtures: the read-only benchmark data beside the checkout (`../shared/data`)."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The shared data directory; tests using it skip when it is absent or incomplete."""
    if not (SHARED_DATA / "READY").is_file():
        pytest.skip(f"shared data not available at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture(scope="session")
def tiny_encoder_dir(tmp_path_factory) -> Path:
    """A randomly initialised 2-layer BERT with a character WordPiece vocabulary, saved as a
    standard checkpoint directory: a real transformers model that loads and runs in milliseconds."""
    import torch
    from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers, processors
    from tokenizers.models import WordPiece
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    characters = list("abcdefghijklmnopqrstuvwxyz0123456789áéíóúñüäöß")
    vocabulary = {token: i for i, token in enumerate(specials + characters + [f"##{c}" for c in characters])}
    tokenizer = Tokenizer(WordPiece(vocabulary, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True, strip_accents=False)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocabulary["[CLS]"]), ("[SEP]", vocabulary["[SEP]"])],
    )
    tokenizer.decoder = decoders.WordPiece()
    path = tmp_path_factory.mktemp("tiny-bert")
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                            sep_token="[SEP]", mask_token="[MASK]").save_pretrained(path)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(vocabulary), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64)
    BertModel(config, add_pooling_layer=False).save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def contextual_encoder_dir(tiny_encoder_dir, tmp_path_factory) -> Path:
    """The tiny BERT re-initialised with larger weights, for training tests: at BERT's usual 0.02
    a 2-layer random model's states hardly depend on the input, and nothing could be learned."""
    import shutil

    import torch
    from transformers import BertConfig, BertModel

    path = tmp_path_factory.mktemp("contextual-bert")
    shutil.copytree(tiny_encoder_dir, path, dirs_exist_ok=True)
    config = BertConfig.from_pretrained(path)
    config.initializer_range = 0.2
    torch.manual_seed(0)
    BertModel(config, add_pooling_layer=False).save_pretrained(path)
    return path
