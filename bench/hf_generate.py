#!/usr/bin/env python3
"""The peer of `wgpt bench --generate`: greedy generation with a KV cache on
the GPU at the same shape, in Hugging Face transformers' `generate` where
transformers is installed, else in plain PyTorch (tests/torch_decode.py's
hand-written KV-cache loop over GPT-2's math). The output says which.

A GPT-2 of random weights (std 0.02) with the given sizes; a prompt of P
tokens, then N tokens greedily, batch B. Prefill = the time to the first new
token; decode = (time for N tokens - time for 1) / (N - 1), the median of
--runs runs after a warm-up. The last line begins "result:".

Usage: hf_generate.py [--layers 12 --heads 12 --channels 768 --vocab 50257 --seq 1024]
                      [--prompt 128] [--tokens 128] [--batch 1] [--dtype fp32|f16|bf16] [--runs 3]
"""
import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import torch_decode  # noqa: E402

DT = {"fp32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


def plain_model(a, dev, dtype):
    g = torch.Generator().manual_seed(1337)
    C, L, V = a.channels, a.layers, a.vocab

    def n(*shape):
        return (torch.randn(*shape, generator=g) * 0.02).to(dev, dtype)

    def ones(k):
        return torch.ones(k, device=dev, dtype=dtype)

    def zeros(k):
        return torch.zeros(k, device=dev, dtype=dtype)
    p = {"wte.weight": n(V, C), "wpe.weight": n(a.seq, C), "ln_f.weight": ones(C), "ln_f.bias": zeros(C)}
    for l in range(L):
        h = f"h.{l}."
        p.update({h + "ln_1.weight": ones(C), h + "ln_1.bias": zeros(C), h + "ln_2.weight": ones(C),
                  h + "ln_2.bias": zeros(C), h + "attn.c_attn.weight": n(C, 3 * C), h + "attn.c_attn.bias": zeros(3 * C),
                  h + "attn.c_proj.weight": n(C, C), h + "attn.c_proj.bias": zeros(C),
                  h + "mlp.c_fc.weight": n(C, 4 * C), h + "mlp.c_fc.bias": zeros(4 * C),
                  h + "mlp.c_proj.weight": n(4 * C, C), h + "mlp.c_proj.bias": zeros(C)})
    cfg = {"n_embd": C, "n_head": a.heads, "n_layer": L}
    return lambda ids, k: torch_decode.greedy(cfg, p, ids[0].tolist(), k, batch=ids.shape[0])


def hf_model(a, dev, dtype):
    import transformers
    cfg = transformers.GPT2Config(n_layer=a.layers, n_head=a.heads, n_embd=a.channels, vocab_size=a.vocab,
                                  n_positions=a.seq)
    try:  # initialised on the GPU where torch can (a 774M model's init on the CPU takes long)
        with torch.device(dev):
            m = transformers.GPT2LMHeadModel(cfg)
    except (AttributeError, TypeError):
        m = transformers.GPT2LMHeadModel(cfg)
    m = m.to(dev, dtype).eval()

    def gen(ids, k):
        return m.generate(ids, max_new_tokens=k, min_new_tokens=k, do_sample=False, use_cache=True, pad_token_id=0,
                          attention_mask=torch.ones_like(ids))
    return gen, f"transformers {transformers.__version__} generate"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for k, v in (("layers", 12), ("heads", 12), ("channels", 768), ("vocab", 50257), ("seq", 1024), ("prompt", 128),
                 ("tokens", 128), ("batch", 1), ("runs", 3)):
        ap.add_argument("--" + k, type=int, default=v)
    ap.add_argument("--dtype", choices=list(DT), default="fp32")
    ap.add_argument("--plain", action="store_true", help="the plain-PyTorch loop even where transformers is installed")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("hf_generate.py: no CUDA device", file=sys.stderr)
        return 1
    dev, dtype = "cuda", DT[a.dtype]
    torch.backends.cuda.matmul.allow_tf32 = False
    gen, peer = None, "plain PyTorch KV-cache loop (tests/torch_decode.py; transformers is not installed)"
    if not a.plain:
        try:
            gen, peer = hf_model(a, dev, dtype)
        except ImportError:
            gen = None
    if gen is None:
        gen = plain_model(a, dev, dtype)
        if a.plain:
            peer = "plain PyTorch KV-cache loop (tests/torch_decode.py)"
    ids = torch.randint(0, a.vocab, (a.batch, a.prompt), generator=torch.Generator().manual_seed(7)).to(dev)

    def timed(k):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.no_grad():
            gen(ids, k)
        torch.cuda.synchronize()
        return time.perf_counter() - t0
    timed(a.tokens), timed(1)  # warm-up
    one = statistics.median(timed(1) for _ in range(a.runs))
    full = statistics.median(timed(a.tokens) for _ in range(a.runs))
    step = (full - one) / max(a.tokens - 1, 1)
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}; peer: {peer}")
    print(f"model: L={a.layers} H={a.heads} C={a.channels} V={a.vocab}, context {a.seq}, {a.dtype}; "
          f"prompt {a.prompt}, {a.tokens} decoded, batch {a.batch}")
    print(f"result: decode {a.batch / step:.0f} tokens/s ({1e3 * step:.3f} ms a step) at batch {a.batch}; "
          f"prefill + first token {1e3 * one:.2f} ms ({a.dtype}; {peer})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
