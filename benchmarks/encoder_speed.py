"""Encoding speed of the bundled multilingual-e5-small on short KB names: fp32 vs bf16 autocast vs
int8 dynamic quantisation of the linear layers, batches sorted by length vs in KB order, and
babelink's ONNX Runtime encoder in fp32 (the runtime of short CLI calls) and int8 (`build
--precision int8`) (2 threads, batch 64, mean pooling, `query: ` prefix).

    python benchmarks/encoder_speed.py [--data ../shared/data] [--no-write] [--names 2048]

Baseline in the same run: fp32 in KB order. Agreement of each setting with fp32 is the
minimum cosine over the names.
"""

from __future__ import annotations

import argparse
import sys
import time

from report import arguments, commit, machine, publish

from babelink.kb.umls import read_umls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--names", type=int, default=2048, help="how many names to encode")
    args = arguments(parser.description, parser)
    import numpy as np
    import torch
    from transformers import AutoModel, AutoTokenizer

    from babelink.encoders import DEFAULT, open_encoder
    from babelink.encoders.e5_bundled import bundled_e5_path

    torch.set_num_threads(2)
    count = args.names
    kb = read_umls(args.data / "kb" / "open-umls" / "MRCONSO.RRF")
    step = kb.num_names // count
    names = kb.names.column("name").to_pylist()[::step][:count]
    path = bundled_e5_path()
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModel.from_pretrained(path, add_pooling_layer=False).eval()

    int8 = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
    onnx = open_encoder(DEFAULT, runtime="onnx", batch_size=64)
    onnx_int8 = open_encoder(DEFAULT, precision="int8", batch_size=64)

    def encode(order: list[int], bf16: bool, network=model) -> np.ndarray:
        vectors = np.zeros((len(names), model.config.hidden_size), dtype=np.float32)
        with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            for start in range(0, len(order), 64):
                batch = order[start : start + 64]
                inputs = tokenizer([f"query: {names[i]}" for i in batch], padding=True, truncation=True,
                                   max_length=25, return_tensors="pt")
                hidden = network(**inputs).last_hidden_state.float()
                mask = inputs["attention_mask"].unsqueeze(-1).float()
                pooled = (hidden * mask).sum(1) / mask.sum(1)
                vectors[batch] = torch.nn.functional.normalize(pooled, dim=-1).numpy()
        return vectors

    kb_order = list(range(len(names)))
    by_length = sorted(kb_order, key=lambda i: len(tokenizer.tokenize(names[i])))
    encode(kb_order[:64], False)  # warm-up
    rows, reference, baseline_speed = [], None, None
    for label, run in (
        ("fp32, KB order (baseline)", lambda: encode(kb_order, False)),
        ("fp32, sorted by length", lambda: encode(by_length, False)),
        ("bf16 autocast, KB order", lambda: encode(kb_order, True)),
        ("bf16 autocast, sorted by length", lambda: encode(by_length, True)),
        ("int8 dynamic quantisation, sorted by length", lambda: encode(by_length, False, int8)),
        ("ONNX Runtime fp32, sorted by length (babelink's `onnx` runtime)", lambda: onnx.encode(names)),
        ("ONNX Runtime int8 per channel, sorted by length (`build --precision int8`)",
         lambda: onnx_int8.encode(names)),
    ):
        started = time.perf_counter()
        vectors = run()
        speed = len(names) / (time.perf_counter() - started)
        reference = vectors if reference is None else reference
        baseline_speed = baseline_speed or speed
        cosine = float((vectors * reference).sum(1).min())
        rows.append(f"| {label} | {speed:,.0f} | {speed / baseline_speed:.2f} | {cosine:.5f} |")
        print(rows[-1], file=sys.stderr)
    text = "\n".join([
        f"## {time.strftime('%Y-%m-%d')} — bundled encoder speed (commit `{commit()}`)", "",
        (f"Command: `python benchmarks/encoder_speed.py --names {count}` · machine: {machine()} · "
         f"torch {torch.__version__}, 2 threads · {len(names):,} open-umls names (every {step}th), batch 64, "
         "max 25 tokens"), "",
        "| setting | names/s | × baseline | min cosine to fp32 |", "|---|---:|---:|---:|", *rows]) + "\n"
    publish(text, not args.no_write, "speed")


if __name__ == "__main__":
    main()
