#!/usr/bin/env python3
"""Greedy decoding of a Hugging Face GPT-2 folder (config.json and
model.safetensors, as `wgpt export --format hf` writes it) in plain PyTorch,
with a KV cache written out by hand: no transformers. The peer of
tests/test_decode_torch.c (CPU, float32) and of bench/hf_generate.py where
transformers is missing (any device and dtype).

Usage: torch_decode.py --model DIR --prompt 1,2,3 --tokens 32
prints the generated ids on one line, separated by spaces.

The math is GPT-2's (as tests/torch_parity.py): learned positions,
pre-LayerNorm blocks (eps 1e-5), causal attention scaled by 1/sqrt(head
size), GELU in its tanh form, the output projection tied to wte. Conv1D
weights are (in, out): x @ W + b.
"""
import argparse
import json
import math
import os
import struct

import torch
import torch.nn.functional as F

DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}


def read_safetensors(path):
    with open(path, "rb") as f:
        b = f.read()
    n = struct.unpack("<Q", b[:8])[0]
    header = json.loads(b[8:8 + n])
    header.pop("__metadata__", None)
    out = {}
    for name, e in header.items():
        s, t = e["data_offsets"]
        out[name] = torch.frombuffer(bytearray(b[8 + n + s:8 + n + t]), dtype=DTYPES[e["dtype"]]).reshape(e["shape"])
    return out


def load(folder, device="cpu", dtype=torch.float32):
    with open(os.path.join(folder, "config.json")) as f:
        cfg = json.load(f)
    t = read_safetensors(os.path.join(folder, "model.safetensors"))
    p = {}
    for k, v in t.items():
        if k.startswith("transformer."):
            k = k[len("transformer."):]
        if k.endswith(".attn.bias") or k.endswith(".attn.masked_bias") or k == "lm_head.weight":
            continue
        p[k] = v.to(device=device, dtype=dtype)
    return cfg, p


class Cache:
    """Keys and values of every layer, (B, NH, positions, hs), grown by cat."""
    def __init__(self, L):
        self.k = [None] * L
        self.v = [None] * L
        self.n = 0


def forward(cfg, p, ids, cache):
    """Logits (B, V) of the last of ids (B, n), appended after cache's positions."""
    C, NH, L = cfg["n_embd"], cfg["n_head"], cfg["n_layer"]
    hs = C // NH
    B, n = ids.shape
    pos = torch.arange(cache.n, cache.n + n, device=ids.device)
    x = p["wte.weight"][ids] + p["wpe.weight"][pos]
    # query i (position cache.n + i) sees keys 0 .. cache.n + i
    mask = torch.ones(n, cache.n + n, dtype=torch.bool, device=ids.device).tril(cache.n)
    for l in range(L):
        h = f"h.{l}."
        a = F.layer_norm(x, (C,), p[h + "ln_1.weight"], p[h + "ln_1.bias"], 1e-5)
        q, k, v = (a @ p[h + "attn.c_attn.weight"] + p[h + "attn.c_attn.bias"]).split(C, dim=2)
        q, k, v = (z.view(B, n, NH, hs).transpose(1, 2) for z in (q, k, v))
        if cache.k[l] is not None:
            k = torch.cat([cache.k[l], k], dim=2)
            v = torch.cat([cache.v[l], v], dim=2)
        cache.k[l], cache.v[l] = k, v
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, n, C)
        x = x + y @ p[h + "attn.c_proj.weight"] + p[h + "attn.c_proj.bias"]
        a = F.layer_norm(x, (C,), p[h + "ln_2.weight"], p[h + "ln_2.bias"], 1e-5)
        a = F.gelu(a @ p[h + "mlp.c_fc.weight"] + p[h + "mlp.c_fc.bias"], approximate="tanh")
        x = x + a @ p[h + "mlp.c_proj.weight"] + p[h + "mlp.c_proj.bias"]
    cache.n += n
    x = F.layer_norm(x[:, -1], (C,), p["ln_f.weight"], p["ln_f.bias"], 1e-5)
    return x @ p["wte.weight"].t()


@torch.no_grad()
def greedy(cfg, p, prompt, tokens, batch=1):
    """ids (batch, tokens): greedy continuations of prompt (a list of ids)."""
    dev = p["wte.weight"].device
    ids = torch.tensor([prompt] * batch, device=dev)
    cache = Cache(cfg["n_layer"])
    out = []
    logits = forward(cfg, p, ids, cache)
    for _ in range(tokens):
        nxt = logits.argmax(dim=-1, keepdim=True)
        out.append(nxt)
        if len(out) == tokens:
            break
        logits = forward(cfg, p, nxt, cache)
    return torch.cat(out, dim=1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--prompt", required=True, help="comma-separated token ids")
    ap.add_argument("--tokens", type=int, default=32)
    a = ap.parse_args()
    cfg, p = load(a.model)
    out = greedy(cfg, p, [int(x) for x in a.prompt.split(",")], a.tokens)
    print(" ".join(str(int(t)) for t in out[0]))


if __name__ == "__main__":
    main()
