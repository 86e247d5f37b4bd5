#!/usr/bin/env python3
"""wgpt beside Hugging Face transformers on the same GPT-2 weights, in one
command (on a GPU machine with torch and transformers; nothing is downloaded):

  python3 bench/hf_roundtrip.py [--batch 4] [--seq 1024] [--steps 20] [--out DIR]
                               [--device cuda|cpu] [--layers L --heads H --channels C] [--all-sizes]

1. transformers' GPT2LMHeadModel(GPT2Config()) (124M, random init, seed 0),
   save_pretrained (safetensors) into DIR/hf.
2. A real batch: this tree's own documentation (README.md, docs/, bench/)
   encoded by `wgpt tokenize --tokenizer gpt2`, the first B x T tokens.
3. transformers' logits on it (fp32, TF32 off) beside wgpt's
   (build/bench_hf_logits importing DIR/hf): max |diff|, next-token argmax
   agreement, and the loss of each.
4. `wgpt export DIR/hf --format hf` and GPT2LMHeadModel.from_pretrained of
   the export: missing/unexpected keys (must be none) and its logits beside
   step 3's (the weights are the same bits, so the same logits).
5. Fine-tuning: `wgpt train --init-from DIR/hf` for --steps steps on the
   same text, `wgpt export` of its checkpoint, from_pretrained, and
   transformers' logits and loss beside wgpt's on the fine-tuned weights.
Run from a built tree (make all). Prints PASS/FAIL lines and exits 1 on a FAIL.
--layers/--heads/--channels change GPT2Config's sizes (a quick try on a CPU).
--all-sizes: then also GPT-2 medium, large and XL (355M, 774M, 1558M; random
init), each imported from the bare model.safetensors (sizes from the shapes,
no config.json), logits on one sequence of the batch beside transformers'.
"""
import argparse
import glob
import os
import subprocess
import sys
import time

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
    import transformers
    from transformers import GPT2Config, GPT2LMHeadModel
except ImportError as e:
    sys.exit(f"hf_roundtrip.py: needs torch and transformers ({e})")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WGPT = os.path.join(ROOT, "build", "wgpt")
LOGITS = os.path.join(ROOT, "build", "bench_hf_logits")
# fp32 through different sum orders: 12 layers of C=768 reductions. The bound
# is relative to the largest logit; what the model chapter's math allows for
# f32 noise is ~1e-6 relative, a wrong term shows as 1e-2 and more.
REL_BOUND = 1e-4
failures = []


def say(*a):
    print(*a, flush=True)


def check(ok, what):
    say(("PASS " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def run(cmd):
    t = time.time()
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    out = (r.stdout + r.stderr).strip()
    if r.returncode:
        sys.exit(f"hf_roundtrip.py: {' '.join(cmd)} failed ({r.returncode}):\n{out}")
    say(f"$ {' '.join(cmd)}  [{time.time() - t:.1f} s]\n  " + out.replace("\n", "\n  ")[-1500:])
    return out


DEVICE = "cuda"


def run_quiet(cmd):
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else "?"


def hf_logits(model, ids):
    with torch.no_grad():
        return model(ids.to(DEVICE)).logits.float().cpu()


def wgpt_logits(path, ids, out):
    B, T = ids.shape
    ids.to(torch.int32).numpy().tofile(os.path.join(out, "tokens.bin"))
    dst = os.path.join(out, "wgpt_logits.bin")
    run([LOGITS, "--model", path, "--tokens", os.path.join(out, "tokens.bin"), "--batch", str(B), "--seq", str(T),
         "--out", dst])
    return torch.from_numpy(np.fromfile(dst, dtype=np.float32)).view(B, T, -1)


def next_token_loss(logits, ids):
    return F.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)), ids[:, 1:].reshape(-1)).item()


def compare(name, got, want, ids):
    d = (got - want).abs().max().item()
    scale = want.abs().max().item()
    agree = (got[:, :-1].argmax(-1) == want[:, :-1].argmax(-1)).float().mean().item()
    lg, lw = next_token_loss(got, ids), next_token_loss(want, ids)
    say(f"{name}: max |diff| {d:.3g} of max |logit| {scale:.3g} (relative {d / scale:.3g}), argmax agreement "
        f"{100 * agree:.3f}%, loss {lg:.6f} vs {lw:.6f}")
    return d / scale, agree, lg, lw


def load_checked(path):
    m, info = GPT2LMHeadModel.from_pretrained(path, output_loading_info=True)
    keys = {k: info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs")}
    say(f"from_pretrained({path}): " + ", ".join(f"{k} {v}" for k, v in keys.items()))
    check(not any(keys.values()), f"from_pretrained of wgpt's export: no missing, unexpected or mismatched keys")
    return m.to(DEVICE).eval()


def other_sizes(name, L, H, C, ids, out):
    """GPT-2 <name> from its bare safetensors file: the sizes from the shapes (H = C / 64)."""
    torch.manual_seed(0)
    m = GPT2LMHeadModel(GPT2Config(n_layer=L, n_head=H, n_embd=C)).eval()
    d = os.path.join(out, "hf-" + name)
    m.save_pretrained(d, safe_serialization=True)
    bare = os.path.join(out, "bare-" + name)
    os.makedirs(bare, exist_ok=True)
    link = os.path.join(bare, "model.safetensors")  # alone in its folder: no config.json beside it
    if not os.path.exists(link):
        os.symlink(os.path.join(d, "model.safetensors"), link)
    want = hf_logits(m.to(DEVICE), ids)
    del m
    torch.cuda.empty_cache() if DEVICE == "cuda" else None
    got = wgpt_logits(link, ids, out)
    rel, _, _, _ = compare(f"{name} ({L} layers, {H} heads, C {C}): wgpt vs transformers", got, want, ids)
    check(rel <= REL_BOUND, f"{name}: wgpt's logits within {REL_BOUND:g} x max |logit| of transformers'")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--out", default=os.path.join(ROOT, "runs", "hf-roundtrip"))
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--layers", type=int)
    ap.add_argument("--heads", type=int)
    ap.add_argument("--channels", type=int)
    ap.add_argument("--all-sizes", action="store_true")
    a = ap.parse_args()
    global DEVICE
    DEVICE = a.device
    sizes = {k: v for k, v in (("n_layer", a.layers), ("n_head", a.heads), ("n_embd", a.channels)) if v}
    for exe in (WGPT, LOGITS):
        if not os.access(exe, os.X_OK):
            sys.exit(f"hf_roundtrip.py: {exe} is missing: build first (make all)")
    os.makedirs(a.out, exist_ok=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.cuda.get_device_properties(0).name if DEVICE == "cuda" else "the CPU"
    say(f"== hf_roundtrip.py on {dev}: torch {torch.__version__}, transformers {transformers.__version__}, "
        f"fp32 (TF32 off); wgpt {run_quiet(['git', 'rev-parse', '--short', 'HEAD'])}")

    # 1. the model, as transformers saves it
    torch.manual_seed(0)
    hf_dir = os.path.join(a.out, "hf")
    ref = GPT2LMHeadModel(GPT2Config(**sizes)).eval()
    ref.save_pretrained(hf_dir, safe_serialization=True)
    say(f"saved GPT2LMHeadModel(GPT2Config({sizes or ''})) ({sum(t.numel() for t in ref.parameters())} parameters) to {hf_dir}: "
        + ", ".join(sorted(os.listdir(hf_dir))))
    ref = ref.to(DEVICE)

    # 2. a real batch of GPT-2 tokens
    shards = os.path.join(a.out, "shards")
    texts = [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "**", "*.md"),
                                                                 recursive=True))
    texts += sorted(glob.glob(os.path.join(ROOT, "bench", "*.md")))
    run([WGPT, "tokenize", "--tokenizer", "gpt2", "--split", "file", "--val-fraction", "0.05", "--force", "--out",
         shards] + texts)
    raw = np.fromfile(sorted(glob.glob(os.path.join(shards, "train_*.bin")))[0], dtype=np.uint16)[512:]
    need = a.batch * a.seq
    if raw.size < need:
        sys.exit(f"hf_roundtrip.py: the text gives {raw.size} tokens, fewer than {need}")
    ids = torch.from_numpy(raw[:need].astype(np.int64)).view(a.batch, a.seq)

    # 3. transformers and wgpt on the same weights
    want = hf_logits(ref, ids)
    got = wgpt_logits(hf_dir, ids, a.out)
    rel, agree, _, _ = compare("import: wgpt vs transformers", got, want, ids)
    check(rel <= REL_BOUND, f"import: wgpt's logits within {REL_BOUND:g} x max |logit| of transformers'")

    # 4. wgpt's export back into transformers
    exported = os.path.join(a.out, "exported")
    run([WGPT, "export", hf_dir, "--format", "hf", "--out", exported])
    back = load_checked(exported)
    again = hf_logits(back, ids)
    d = (again - want).abs().max().item()
    say(f"export: from_pretrained(export) logits vs the original model's: max |diff| {d:.3g}")
    check(d == 0.0, "export: from_pretrained gives back the same logits (bit for bit)")
    del back

    # 5. fine-tune in wgpt, hand the result to transformers
    ft = os.path.join(a.out, "finetune")
    run([WGPT, "train", "--init-from", hf_dir, "--tokenizer", "gpt2", "--data", os.path.join(shards, "*.bin"),
         "--out", ft, "--resume", "none", "--batch", str(a.batch), "--seq", str(a.seq), "--steps", str(a.steps),
         "--lr", "3e-4", "--warmup", "2", "--val-every", "0", "--checkpoint-every", "0", "--log-every", "5"])
    ft_hf = os.path.join(a.out, "finetune-hf")
    run([WGPT, "export", os.path.join(ft, "latest.ckpt"), "--format", "hf", "--out", ft_hf])
    tuned = load_checked(ft_hf)
    want_ft = hf_logits(tuned, ids)
    got_ft = wgpt_logits(os.path.join(ft, "latest.ckpt"), ids, a.out)
    rel_ft, _, lg, lw = compare("fine-tuned: wgpt vs transformers", got_ft, want_ft, ids)
    check(rel_ft <= REL_BOUND, f"fine-tuned: wgpt's logits within {REL_BOUND:g} x max |logit| of transformers'")
    base = next_token_loss(want, ids)
    check(lw < base, f"fine-tuned: transformers' loss on the batch fell from {base:.4f} to {lw:.4f}")
    if a.all_sizes:
        for name, (L, H, C) in (("medium", (24, 16, 1024)), ("large", (36, 20, 1280)), ("xl", (48, 25, 1600))):
            other_sizes(name, L, H, C, ids[:1], a.out)
    say(f"== {'all passed' if not failures else f'{len(failures)} FAILED'}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
