#!/usr/bin/env python3
"""The PyTorch side of tests/test_torch_parity.c: a small GPT-2 in plain
PyTorch (CPU), written in Hugging Face's layout as safetensors by hand, with
what PyTorch computes on it for wgpt to match.

The model is the math of README's "The model" (llm.c's GPT-2): learned
positions, pre-LayerNorm blocks (eps 1e-5), causal multi-head attention scaled
by 1/sqrt(head size), GELU in its tanh form, the token embedding tied to the
output projection; the loss is the mean cross-entropy over B*T positions. It
is written with torch.nn.functional only, no transformers.

Usage: torch_parity.py --out DIR. Writes:
  DIR/model/config.json, model.safetensors   F32, "transformer." names, Conv1D
      (in, out) weights, lm_head.weight (tied, equal to wte) and the attn.bias
      mask buffers HF keeps: what wgpt imports
  DIR/grads/...        d loss / d parameter of batch 0, same names and layout
  DIR/grads64/...      the same computed in float64 (then rounded to F32)
  DIR/model_f16.safetensors, model_bf16.safetensors   the weights in F16 and
      BF16 (bare names, no lm_head), and model_{f16,bf16}_as_f32.safetensors:
      PyTorch's own widening of them to F32, which wgpt's must equal exactly
  DIR/expected.safetensors  tokens, targets (I32 (STEPS, B, T)), logits
      (B, T, V) and loss of batch 0, the losses of STEPS AdamW steps (one batch
      each), each also in float64 (logits64, loss64, losses64), and adamw:
      [lr, beta1, beta2, eps, weight_decay, max_grad_norm]

torch_parity.py --out DIR --check-export EXPORTED: reads what `wgpt export
--format hf` wrote from DIR/model into EXPORTED, checks it against the layout
transformers' GPT2LMHeadModel loads (config.json's fields; exactly its
state_dict's names and shapes, less lm_head.weight, tied to wte, which
save_pretrained leaves out too; F32; metadata format "pt"), loads it into
the model above and requires the same logits, bit for bit, as the original
weights gave. (transformers itself is not in Debian; bench/hf_roundtrip.py
runs the real from_pretrained where it is installed.)
"""
import argparse
import json
import math
import os
import struct
import sys

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:
    sys.exit(f"torch_parity.py: PyTorch is not installed ({e}); scripts/setup.sh installs python3-torch")

L, NH, C, MAXT, V = 2, 4, 64, 32, 97  # head size 16; V pads to 128 in wgpt, 97 rows here
B, T, STEPS = 2, 24, 10
ADAMW = dict(lr=3e-3, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.1, max_grad_norm=1.0)


# --- safetensors, by hand: u64 header length, JSON header, raw bytes ----------

DTYPE = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.float64: "F64", torch.int32: "I32"}


def raw_bytes(t):
    t = t.detach().contiguous().cpu()
    if t.dtype == torch.bfloat16:  # numpy has no bfloat16: the same 2 bytes as int16
        t = t.view(torch.int16)
    return t.numpy().tobytes()


def write_safetensors(path, tensors):
    header, blobs, at = {"__metadata__": {"format": "pt"}}, [], 0
    for name, t in tensors.items():
        b = raw_bytes(t)
        header[name] = {"dtype": DTYPE[t.dtype], "shape": list(t.shape), "data_offsets": [at, at + len(b)]}
        blobs.append(b)
        at += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def write_config(folder):
    cfg = dict(model_type="gpt2", n_layer=L, n_head=NH, n_embd=C, n_positions=MAXT, n_ctx=MAXT, vocab_size=V,
               activation_function="gelu_new", layer_norm_epsilon=1e-5, tie_word_embeddings=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)


# --- the model -----------------------------------------------------------------

# HF names (no prefix) in nn.Linear's (out, in) layout; CONV1D are stored transposed.
CONV1D = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")


def init_params(gen):
    """Weights N(0, 0.1), biases N(0, 0.05), LayerNorm weights 1 + N(0, 0.1):
    larger than GPT-2's init, so attention is far from uniform and GELU works
    in its curved part."""
    def n(*shape, std):
        return torch.randn(*shape, generator=gen, dtype=torch.float64) * std
    p = {"wte.weight": n(V, C, std=0.1), "wpe.weight": n(MAXT, C, std=0.1)}
    for l in range(L):
        h = f"h.{l}."
        p[h + "ln_1.weight"] = 1 + n(C, std=0.1)
        p[h + "ln_1.bias"] = n(C, std=0.05)
        p[h + "attn.c_attn.weight"] = n(3 * C, C, std=0.1)
        p[h + "attn.c_attn.bias"] = n(3 * C, std=0.05)
        p[h + "attn.c_proj.weight"] = n(C, C, std=0.1)
        p[h + "attn.c_proj.bias"] = n(C, std=0.05)
        p[h + "ln_2.weight"] = 1 + n(C, std=0.1)
        p[h + "ln_2.bias"] = n(C, std=0.05)
        p[h + "mlp.c_fc.weight"] = n(4 * C, C, std=0.1)
        p[h + "mlp.c_fc.bias"] = n(4 * C, std=0.05)
        p[h + "mlp.c_proj.weight"] = n(C, 4 * C, std=0.1)
        p[h + "mlp.c_proj.bias"] = n(C, std=0.05)
    p["ln_f.weight"] = 1 + n(C, std=0.1)
    p["ln_f.bias"] = n(C, std=0.05)
    return {k: v.float() for k, v in p.items()}  # float32 values; the float64 run widens these


def forward(p, idx):
    """Logits (B, T, V) of token ids idx (B, T)."""
    Bq, Tq = idx.shape
    hs = C // NH
    x = p["wte.weight"][idx] + p["wpe.weight"][:Tq]
    causal = torch.ones(Tq, Tq, dtype=torch.bool).tril()
    for l in range(L):
        h = f"h.{l}."
        a = F.layer_norm(x, (C,), p[h + "ln_1.weight"], p[h + "ln_1.bias"], 1e-5)
        q, k, v = F.linear(a, p[h + "attn.c_attn.weight"], p[h + "attn.c_attn.bias"]).split(C, dim=2)
        q, k, v = (z.view(Bq, Tq, NH, hs).transpose(1, 2) for z in (q, k, v))  # (B, NH, T, hs)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)
        att = att.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(Bq, Tq, C)
        x = x + F.linear(y, p[h + "attn.c_proj.weight"], p[h + "attn.c_proj.bias"])
        a = F.layer_norm(x, (C,), p[h + "ln_2.weight"], p[h + "ln_2.bias"], 1e-5)
        a = F.gelu(F.linear(a, p[h + "mlp.c_fc.weight"], p[h + "mlp.c_fc.bias"]), approximate="tanh")
        x = x + F.linear(a, p[h + "mlp.c_proj.weight"], p[h + "mlp.c_proj.bias"])
    x = F.layer_norm(x, (C,), p["ln_f.weight"], p["ln_f.bias"], 1e-5)
    return x @ p["wte.weight"].t()  # tied output projection


def loss_of(logits, targets):
    return F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))


def run(p0, tokens, targets, dtype):
    """Logits, loss and gradients of batch 0, then STEPS AdamW steps (one batch
    each) with wgpt's clipping; all in dtype."""
    p = {k: v.to(dtype).clone().requires_grad_(True) for k, v in p0.items()}
    logits = forward(p, tokens[0])
    loss = loss_of(logits, targets[0])
    loss.backward()
    grads = {k: v.grad.detach().clone() for k, v in p.items()}
    for v in p.values():
        v.grad = None
    # decay on the 2D weights only, as wgpt (wte, wpe and the four matmul weights a layer)
    decay = [v for v in p.values() if v.dim() == 2]
    rest = [v for v in p.values() if v.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": ADAMW["weight_decay"]},
                             {"params": rest, "weight_decay": 0.0}],
                            lr=ADAMW["lr"], betas=(ADAMW["beta1"], ADAMW["beta2"]), eps=ADAMW["eps"])
    losses, norms = [], []
    for s in range(STEPS):
        opt.zero_grad(set_to_none=True)
        step_loss = loss_of(forward(p, tokens[s]), targets[s])
        step_loss.backward()
        # wgpt clips by max_norm / norm when norm > max_norm (no + 1e-6, unlike clip_grad_norm_)
        norm = torch.sqrt(sum((v.grad * v.grad).sum() for v in p.values()))
        if norm > ADAMW["max_grad_norm"]:
            for v in p.values():
                v.grad.mul_(ADAMW["max_grad_norm"] / norm)
        opt.step()
        losses.append(step_loss.item())
        norms.append(norm.item())
    return logits.detach(), loss.detach(), grads, torch.tensor(losses, dtype=dtype), norms


def hf_layout(p, prefix="transformer."):
    """Our (out, in) matmul weights as HF's Conv1D (in, out), with the prefix."""
    return {prefix + k: (v.t() if k.endswith(CONV1D) else v).contiguous() for k, v in p.items()}


def save_model(folder, p, with_extras):
    os.makedirs(folder, exist_ok=True)
    write_config(folder)
    t = hf_layout(p)
    if with_extras:  # what HF files carry besides the weights: wgpt must accept them
        t["lm_head.weight"] = p["wte.weight"].clone()
        for l in range(L):
            t[f"transformer.h.{l}.attn.bias"] = torch.ones(MAXT, MAXT).tril().view(1, 1, MAXT, MAXT)
    write_safetensors(os.path.join(folder, "model.safetensors"), t)


def read_safetensors(path):
    with open(path, "rb") as f:
        b = f.read()
    n = struct.unpack("<Q", b[:8])[0]
    header = json.loads(b[8:8 + n])
    meta = header.pop("__metadata__", None)
    dtypes = {v: k for k, v in DTYPE.items()}
    out = {}
    for name, e in header.items():
        s, t = e["data_offsets"]
        out[name] = (e["dtype"], torch.frombuffer(bytearray(b[8 + n + s:8 + n + t]), dtype=dtypes[e["dtype"]])
                     .reshape(e["shape"]))
    return out, meta


def gpt2lmheadmodel_layout(cfg):
    """Names and shapes of transformers' GPT2LMHeadModel.state_dict() (its
    Conv1D weights are (in, out)); the attn.bias mask buffers are not
    persistent, so they are no part of it."""
    C, L, V, P = cfg["n_embd"], cfg["n_layer"], cfg["vocab_size"], cfg["n_positions"]
    k = {"transformer.wte.weight": [V, C], "transformer.wpe.weight": [P, C]}
    for i in range(L):
        h = f"transformer.h.{i}."
        k.update({h + "ln_1.weight": [C], h + "ln_1.bias": [C],
                  h + "attn.c_attn.weight": [C, 3 * C], h + "attn.c_attn.bias": [3 * C],
                  h + "attn.c_proj.weight": [C, C], h + "attn.c_proj.bias": [C],
                  h + "ln_2.weight": [C], h + "ln_2.bias": [C],
                  h + "mlp.c_fc.weight": [C, 4 * C], h + "mlp.c_fc.bias": [4 * C],
                  h + "mlp.c_proj.weight": [4 * C, C], h + "mlp.c_proj.bias": [C]})
    k.update({"transformer.ln_f.weight": [C], "transformer.ln_f.bias": [C], "lm_head.weight": [V, C]})
    return k


def check_export(out, exported):
    with open(os.path.join(exported, "config.json")) as f:
        cfg = json.load(f)
    want = dict(architectures=["GPT2LMHeadModel"], model_type="gpt2", n_layer=L, n_head=NH, n_embd=C,
                n_positions=MAXT, vocab_size=V, activation_function="gelu_new", layer_norm_epsilon=1e-5,
                tie_word_embeddings=True)
    bad = {k: (cfg.get(k), v) for k, v in want.items() if cfg.get(k) != v}
    assert not bad, f"config.json: (got, want) {bad}"
    tensors, meta = read_safetensors(os.path.join(exported, "model.safetensors"))
    # transformers wants format pt; wgpt's export id pairs the file with its config.json
    assert meta.get("format") == "pt" and set(meta) <= {"format", "wgpt_export_id"}, f"metadata {meta}"
    assert meta.get("wgpt_export_id") == cfg.get("wgpt_export_id"), "config.json and the weights from one export"
    layout = gpt2lmheadmodel_layout(cfg)
    del layout["lm_head.weight"]  # tied: save_pretrained leaves it out and from_pretrained ties it back
    missing, unexpected = sorted(set(layout) - set(tensors)), sorted(set(tensors) - set(layout))
    assert not missing and not unexpected, f"missing keys {missing}, unexpected keys {unexpected}"
    for name, (dt, t) in tensors.items():
        assert dt == "F32" and list(t.shape) == layout[name], f"{name}: {dt} {list(t.shape)}, want F32 {layout[name]}"
    p = {k[len("transformer."):]: (t.t() if k.endswith(CONV1D) else t).contiguous() for k, (_, t) in tensors.items()}
    exp, _ = read_safetensors(os.path.join(out, "expected.safetensors"))
    logits = forward(p, exp["tokens"][1][0].long())
    assert torch.equal(logits, exp["logits"][1]), \
        f"logits differ by {(logits - exp['logits'][1]).abs().max().item():.3g}"
    print(f"export: {len(tensors)} tensors, GPT2LMHeadModel's state_dict less the tied lm_head.weight; "
          f"PyTorch's logits on it equal the original's bit for bit")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--check-export", metavar="EXPORTED", help="check wgpt's HF export of DIR/model (see above)")
    a = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)  # the same sums every run
    if a.check_export:
        check_export(a.out, a.check_export)
        return
    gen = torch.Generator().manual_seed(1234)
    p0 = init_params(gen)
    # a learnable stream (the next id is 5 x + 11 mod V, or 1 time in 5 a random one): the loss falls
    data = torch.randint(0, V, (STEPS, B, T + 1), generator=gen)
    keep = torch.rand(STEPS, B, T + 1, generator=gen) < 0.8
    for i in range(1, T + 1):
        data[:, :, i] = torch.where(keep[:, :, i], (5 * data[:, :, i - 1] + 11) % V, data[:, :, i])
    tokens, targets = data[:, :, :-1].contiguous(), data[:, :, 1:].contiguous()

    logits, loss, grads, losses, norms = run(p0, tokens, targets, torch.float32)
    logits64, loss64, grads64, losses64, _ = run(p0, tokens, targets, torch.float64)

    os.makedirs(a.out, exist_ok=True)
    save_model(os.path.join(a.out, "model"), p0, with_extras=True)
    save_model(os.path.join(a.out, "grads"), grads, with_extras=False)
    save_model(os.path.join(a.out, "grads64"), {k: v.float() for k, v in grads64.items()}, with_extras=False)
    for name, dt in (("f16", torch.float16), ("bf16", torch.bfloat16)):
        low = {k: v.to(dt) for k, v in p0.items()}
        write_safetensors(os.path.join(a.out, f"model_{name}.safetensors"), hf_layout(low, prefix=""))
        write_safetensors(os.path.join(a.out, f"model_{name}_as_f32.safetensors"),
                          hf_layout({k: v.float() for k, v in low.items()}, prefix=""))
    adamw = torch.tensor([ADAMW[k] for k in ("lr", "beta1", "beta2", "eps", "weight_decay", "max_grad_norm")])
    write_safetensors(os.path.join(a.out, "expected.safetensors"), {
        "tokens": tokens.to(torch.int32), "targets": targets.to(torch.int32),
        "logits": logits, "loss": loss.view(1), "losses": losses,
        "logits64": logits64, "loss64": loss64.view(1), "losses64": losses64,
        "adamw": adamw.float(),
    })
    print(f"torch {torch.__version__}: loss {loss.item():.7f} (float64 {loss64.item():.7f}); "
          f"{STEPS} AdamW steps: {losses[0].item():.5f} -> {losses[-1].item():.5f}, "
          f"grad norms {min(norms):.3f}..{max(norms):.3f}")


if __name__ == "__main__":
    main()
