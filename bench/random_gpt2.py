#!/usr/bin/env python3
"""Writes a GPT-2-shaped model with random weights as a Hugging Face folder
(config.json, model.safetensors in F16) that `wgpt sample/serve --checkpoint
DIR` load: for timings that need a model of a real size but not a trained one.
Uses numpy, else torch, else Python alone (a block of 64K random values
repeated: fine for timings, quick without either).

usage: random_gpt2.py OUT [--layers 12 --heads 12 --channels 768 --context 1024 --vocab 50257 --seed 0]
"""
import argparse
import json
import os
import struct


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--channels", type=int, default=768)
    ap.add_argument("--context", type=int, default=1024)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    try:
        import numpy as np
        rng = np.random.default_rng(a.seed)

        def randn(n, std):
            return (rng.standard_normal(n, dtype=np.float32) * std).astype(np.float16).tobytes()
    except ImportError:
        try:
            import torch
            torch.manual_seed(a.seed)

            def randn(n, std):
                return (torch.randn(n) * std).to(torch.float16).numpy().tobytes()
        except ImportError:
            import random
            rng, block = random.Random(a.seed), 65536
            base = [rng.gauss(0.0, 1.0) for _ in range(block)]
            cache = {}

            def randn(n, std):
                if std not in cache:
                    cache[std] = struct.pack("<%de" % block, *[x * std for x in base])
                b = cache[std]
                return b * (n // block) + b[:2 * (n % block)]
    C, L, V, T = a.channels, a.layers, a.vocab, a.context
    shapes = [("wte.weight", [V, C], 0.02), ("wpe.weight", [T, C], 0.01)]
    for l in range(L):
        h = "h.%d." % l
        shapes += [(h + "ln_1.weight", [C], None), (h + "ln_1.bias", [C], 0.0),
                   (h + "attn.c_attn.weight", [C, 3 * C], 0.02), (h + "attn.c_attn.bias", [3 * C], 0.0),
                   (h + "attn.c_proj.weight", [C, C], 0.02 / (2 * L) ** 0.5), (h + "attn.c_proj.bias", [C], 0.0),
                   (h + "ln_2.weight", [C], None), (h + "ln_2.bias", [C], 0.0),
                   (h + "mlp.c_fc.weight", [C, 4 * C], 0.02), (h + "mlp.c_fc.bias", [4 * C], 0.0),
                   (h + "mlp.c_proj.weight", [4 * C, C], 0.02 / (2 * L) ** 0.5), (h + "mlp.c_proj.bias", [C], 0.0)]
    shapes += [("ln_f.weight", [C], None), ("ln_f.bias", [C], 0.0)]
    header, off = {}, 0
    for name, shape, _ in shapes:
        n = 1
        for d in shape:
            n *= d
        header[name] = {"dtype": "F16", "shape": shape, "data_offsets": [off, off + 2 * n]}
        off += 2 * n
    hj = json.dumps(header).encode()
    hj += b" " * (-len(hj) % 8)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(hj)) + hj)
        for name, shape, std in shapes:
            n = 1
            for d in shape:
                n *= d
            if std is None:
                f.write(struct.pack("<e", 1.0) * n)  # LayerNorm gains
            elif std == 0.0:
                f.write(b"\0\0" * n)
            else:
                f.write(randn(n, std))
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump({"model_type": "gpt2", "n_layer": L, "n_head": a.heads, "n_embd": C, "n_positions": T,
                   "n_ctx": T, "vocab_size": V}, f)
    print("wrote %s: %d layers, %d heads, %d channels, context %d, vocabulary %d" % (a.out, L, a.heads, C, T, V))


if __name__ == "__main__":
    main()
