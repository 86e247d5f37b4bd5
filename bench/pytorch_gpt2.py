#!/usr/bin/env python3
"""The PyTorch peer of `wgpt bench`: the same GPT-2 124M training step, timed.

Model: GPT-2 124M as in llm.c / nanoGPT: 12 layers, 12 heads, C 768, context
1024, vocabulary 50257 padded to 50304 (like llm.c's train_gpt2.py; --vocab-pad
50257 turns the padding off). wgpt pads the same way but keeps the padded
logits out of the softmax; here the loss runs over all 50304 columns, as in
llm.c's PyTorch reference.
Pre-LayerNorm blocks, GELU (tanh form), token embedding tied to the output
projection, learned positions, causal attention through
F.scaled_dot_product_attention(is_causal=True) (flash attention in bf16; fp32
has no flash kernel, so PyTorch picks its memory-efficient kernel).

Step: forward, cross-entropy (mean over B*T tokens), backward,
clip_grad_norm_(1.0), AdamW (lr 6e-4, betas (0.9, 0.95), eps 1e-8, weight
decay 0.1 on the 2D weights only: wte, wpe and the four matmul weights a
layer, as wgpt does), fused=True where available. Each step reads the loss
back to the host (loss.item()), as `wgpt bench` does.

Modes:
  fp32   fp32 with TF32 off (matmul and cuDNN): the like-for-like peer of wgpt
  tf32   fp32 storage, TF32 tensor-core matmuls
  bf16   torch.autocast(bfloat16), TF32 on for what stays fp32
--profile: after the timed steps, 3 more steps under torch.profiler (CUDA
kernels only): each kernel's GPU time a step, and the sums for the matmuls
(cuBLAS), the attention (flash/efficient) and the rest, beside `wgpt bench
--profile`. GPU time, not wall time: a step that waits on the CPU does not
count its wait here.
--matmul: times the matmuls of `wgpt bench --micro` at the same shapes instead
(forward, backward input, backward weight; fp32 TF32 off unless --mode says
otherwise), plus a plain device-to-device copy as the bandwidth reference.
Under torchrun (`torchrun --standalone --nproc_per_node N bench/pytorch_gpt2.py
...`): DistributedDataParallel over NCCL, a GPU a rank, each rank its own
batch of --batch sequences; rank 0 prints, tokens/s counts all ranks.

Output lines that bench/compare.sh reads (one "result:" line per run):
  result: 341.2 ms/step, 12005 tokens/s, 9.65 TFLOP/s, 3000.0 MiB max allocated (mode fp32, batch 4, T 1024, ranks 1; median of 10 steps, mean 343.0 ms)
  matmul qkv 4096 768 2304 forward 1.234 9.876
Needs only torch (PyTorch 2.x with CUDA).
"""
import argparse
import os
import math
import statistics
import sys
import time

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:  # compare.sh checks this first; say it plainly anyway
    sys.exit(f"pytorch_gpt2.py: PyTorch is not installed ({e})")


# --- the model ---------------------------------------------------------------


class Block(nn.Module):
    def __init__(self, C, n_head):
        super().__init__()
        self.n_head = n_head
        self.ln_1 = nn.LayerNorm(C)
        self.c_attn = nn.Linear(C, 3 * C)
        self.attn_proj = nn.Linear(C, C)
        self.ln_2 = nn.LayerNorm(C)
        self.c_fc = nn.Linear(C, 4 * C)
        self.mlp_proj = nn.Linear(4 * C, C)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        hs = C // self.n_head
        q = q.view(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)
        k = k.view(B, T, self.n_head, hs).transpose(1, 2)
        v = v.view(B, T, self.n_head, hs).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.attn_proj(y)
        x = x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))
        return x


class GPT2(nn.Module):
    def __init__(self, n_layer, n_head, C, max_T, vocab_padded):
        super().__init__()
        self.wte = nn.Embedding(vocab_padded, C)
        self.wpe = nn.Embedding(max_T, C)
        self.blocks = nn.ModuleList([Block(C, n_head) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(C)
        self.lm_head = nn.Linear(C, vocab_padded, bias=False)
        self.lm_head.weight = self.wte.weight  # tied, as in GPT-2
        # GPT-2's initialisation (as wgpt_gpt2_init_params): N(0, 0.02), the
        # residual projections N(0, 0.02 / sqrt(2L)), biases 0, LayerNorm 1/0.
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif p.dim() >= 2:
                std = 0.02 / math.sqrt(2 * n_layer) if name.endswith("proj.weight") else 0.02
                nn.init.normal_(p, mean=0.0, std=std)

    def forward(self, idx, targets):
        B, T = idx.shape
        pos = torch.arange(T, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)).float(), targets.view(-1))


# --- settings ------------------------------------------------------------------------


def set_mode(mode):
    """TF32 off for fp32 (the like-for-like peer), on for tf32 and bf16."""
    tf32 = mode != "fp32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.set_float32_matmul_precision("high" if tf32 else "highest")


def describe_device():
    p = torch.cuda.get_device_properties(0)
    print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}, "
          f"device {p.name} ({p.total_memory / 2**30:.0f} GiB), capability {p.major}.{p.minor}")


def make_adamw(model):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}]
    kw = dict(lr=6e-4, betas=(0.9, 0.95), eps=1e-8)
    try:
        return torch.optim.AdamW(groups, fused=True, **kw), "fused"
    except (TypeError, RuntimeError):  # an old PyTorch, or fused unsupported here
        return torch.optim.AdamW(groups, **kw), "foreach/default"


# --- the training step -----------------------------------------------------------------


def bench_step(a):
    set_mode(a.mode)
    # Under torchrun (WORLD_SIZE > 1): DistributedDataParallel over NCCL, a GPU
    # a rank (LOCAL_RANK), each rank its own batch; rank 0 prints; tokens/s
    # counts every rank's tokens.
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if world > 1:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        torch.distributed.init_process_group("nccl")
    dev = "cuda"
    torch.manual_seed(1337)
    V, Vp = a.vocab, a.vocab_pad
    # wpe holds max(1024, T) positions, as `wgpt bench` (so N, and the FLOPs, agree).
    model = GPT2(a.layers, a.heads, a.channels, max(1024, a.seq), Vp).to(dev)
    n_params = sum(p.numel() for p in model.parameters())  # the tied wte counted once
    opt, opt_kind = make_adamw(model)
    step_model = model
    if world > 1:
        step_model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[torch.cuda.current_device()])
    step_model = torch.compile(step_model) if a.compile else step_model
    # Random tokens, one fixed batch (as `wgpt bench`): targets are the next token.
    g = torch.Generator(device=dev).manual_seed(42 + rank)
    data = torch.randint(0, V, (a.batch, a.seq + 1), device=dev, generator=g)
    x, y = data[:, :-1].contiguous(), data[:, 1:].contiguous()
    amp = torch.autocast("cuda", dtype=torch.bfloat16) if a.mode == "bf16" else None
    if rank == 0:
        describe_device()
    print(f"model: L={a.layers} H={a.heads} C={a.channels} V={V} (padded {Vp}), {n_params} parameters; "
          f"batch {a.batch} x {a.seq} tokens; mode {a.mode}; AdamW {opt_kind}; compile {'on' if a.compile else 'off'}")

    def step():
        if amp is not None:
            with amp:
                loss = step_model(x, y)
        else:
            loss = step_model(x, y)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item(), norm

    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    times = []
    for i in range(1, a.warmup + a.steps + 1):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        loss, norm = step()
        torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        if i > a.warmup:
            times.append(dt)
        if rank == 0:
            print(f"step {i:3d}{' (warm-up)' if i <= a.warmup else ''}: loss {loss:.4f}, grad norm {norm.item():.3f}, "
                  f"{dt * 1e3:.1f} ms", flush=True)
    # the median step, as `wgpt bench`: one slow step on a shared GPU moves a mean, not this
    ms = statistics.median(times) * 1e3
    mean = sum(times) * 1e3 / a.steps
    tps = world * a.batch * a.seq / (ms * 1e-3)
    # 6N + 6*L*C*T FLOPs per token (forward and backward; attention's QK and AV), as `wgpt bench`
    flops = 6.0 * n_params + 6.0 * a.layers * a.channels * a.seq
    mib = torch.cuda.max_memory_allocated() / 2**20
    if rank == 0:
        print(f"result: {ms:.1f} ms/step, {tps:.0f} tokens/s, {flops * tps * 1e-12:.2f} TFLOP/s, "
              f"{mib:.1f} MiB max allocated (mode {a.mode}, batch {a.batch}, T {a.seq}, ranks {world}; "
              f"median of {a.steps} steps, mean {mean:.1f} ms)")
    if a.profile:  # every rank steps (DDP's exchange needs them all); rank 0 prints
        profile_steps(step, 3, rank == 0)
    if world > 1:
        torch.distributed.destroy_process_group()


# --- where the step's GPU time goes ----------------------------------------------------------

# Kernel names by what they compute (cuBLAS: sm90_xmma_gemm_*, nvjet_*,
# cutlass_*, splitKreduce; SDPA: flash_* and fmha_* / *efficient_attention*)
KINDS = (("matmul", ("gemm", "nvjet", "xmma", "cutlass", "splitkreduce")),
         ("attention", ("flash", "fmha", "attention")))


def kind_of(name):
    n = name.lower()
    for kind, keys in KINDS:
        if any(k in n for k in keys):
            return kind
    return "rest"


def device_us(ev):
    """An aggregated event's own GPU time in us (the attribute's name changed across PyTorch versions)."""
    for attr in ("self_device_time_total", "self_cuda_time_total"):
        if hasattr(ev, attr):
            return float(getattr(ev, attr))
    return 0.0


def profile_steps(step, n, show=True):
    """GPU time a step of every kernel over n steps, printed by kind and by kernel."""
    from torch.profiler import profile, ProfilerActivity
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(n):
            step()
        torch.cuda.synchronize()
    if not show:
        return
    rows = [(device_us(e) / n * 1e-3, e.count / n, e.key) for e in prof.key_averages()]
    rows = sorted((r for r in rows if r[0] > 0), reverse=True)
    total = sum(r[0] for r in rows)
    if total <= 0:
        print("profile: torch.profiler recorded no GPU kernels (CUPTI unavailable?)")
        return
    ms_of = {"matmul": 0.0, "attention": 0.0, "rest": 0.0}
    calls_of = dict(ms_of)
    for ms, calls, name in rows:
        ms_of[kind_of(name)] += ms
        calls_of[kind_of(name)] += calls
    print(f"profile: GPU time a step {total:.2f} ms (the mean of {n} steps under torch.profiler)")
    # the line `wgpt bench --profile` prints, which compare.sh --profile sets beside it
    print(f"  by kind: matmuls {ms_of['matmul']:.2f} ms ({calls_of['matmul']:.0f} calls), "
          f"attention {ms_of['attention']:.2f} ms ({calls_of['attention']:.0f} calls), "
          f"the rest {ms_of['rest']:.2f} ms ({calls_of['rest']:.0f} calls)")
    print("# profile      ms/step  calls/step kind       kernel")
    for ms, calls, name in rows[:40]:
        print(f"profile-kernel {ms:8.3f} {calls:9.1f}  {kind_of(name):<10s} {name[:110]}")
    if len(rows) > 40:
        print(f"profile-kernel {sum(r[0] for r in rows[40:]):8.3f}         -  -          ({len(rows) - 40} more kernels)")


# --- matmuls at the shapes of `wgpt bench --micro` ------------------------------------------


def time_cuda(fn, runs, warmup, min_warmup_ms=100.0):
    """Median GPU time (ms) of fn over `runs` runs, after >= warmup runs and >= min_warmup_ms."""
    t0 = time.perf_counter()
    w = 0
    while w < warmup or (time.perf_counter() - t0) * 1e3 < min_warmup_ms:
        fn()
        torch.cuda.synchronize()
        w += 1
    times = []
    for _ in range(runs):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    return statistics.median(times)


def bench_matmul(a):
    set_mode(a.mode)
    dev = "cuda"
    torch.manual_seed(0)
    N, C = a.rows, a.channels
    describe_device()
    print(f"timing: CUDA events, median of {a.runs} runs after >= 2 warm-up runs and >= 100 ms; "
          f"mode {a.mode} (TF32 {'on' if a.mode != 'fp32' else 'off'})")
    dtype = {"bf16": torch.bfloat16, "f16": torch.float16}.get(a.mode, torch.float32)
    # half-precision rows carry the mode in the pass name ("forward_f16"): the
    # names of wgpt's subgroup-matrix rows, which compare.sh pairs them with
    sfx = "_" + a.mode if a.mode in ("bf16", "f16") else ""
    shapes = [("qkv", C, 3 * C, True), ("attproj", C, C, True), ("fc", C, 4 * C, True),
              ("fcproj", 4 * C, C, True), ("logits", C, a.vocab_pad, False)]
    print("# matmul  shape        N      C     OC pass                ms  TFLOP/s   (2*N*C*OC / time)")

    def row(name, n, c, oc, pass_, ms):
        pass_ += sfx
        tflops = 2.0 * n * c * oc / (ms * 1e-3) * 1e-12
        print(f"matmul {name:<8s} {n:6d} {c:6d} {oc:6d} {pass_:<11s} {ms:10.3f} {tflops:8.3f}", flush=True)

    for name, c, oc, has_bias in shapes:
        inp = torch.rand(N, c, device=dev, dtype=dtype) * 2 - 1
        w = (torch.rand(oc, c, device=dev, dtype=dtype) - 0.5) * 0.1
        bias = (torch.rand(oc, device=dev, dtype=dtype) - 0.5) * 0.2
        dout = (torch.rand(N, oc, device=dev, dtype=dtype) - 0.5) * 2e-3
        out = torch.empty(N, oc, device=dev, dtype=dtype)
        dinp = torch.empty(N, c, device=dev, dtype=dtype)
        dw = torch.empty(oc, c, device=dev, dtype=dtype)
        if has_bias:  # what nn.Linear runs: one cuBLAS call with the bias in its epilogue
            fwd = lambda: torch.addmm(bias, inp, w.t(), out=out)
        else:
            fwd = lambda: torch.mm(inp, w.t(), out=out)
        row(name, N, c, oc, "forward", time_cuda(fwd, a.runs, 2))
        row(name, N, c, oc, "bwd_input", time_cuda(lambda: torch.mm(dout, w, out=dinp), a.runs, 2))
        row(name, N, c, oc, "bwd_weight", time_cuda(lambda: torch.mm(dout.t(), inp, out=dw), a.runs, 2))
        del inp, w, bias, dout, out, dinp, dw
        torch.cuda.empty_cache()
    sq_a = torch.rand(N, N, device=dev, dtype=dtype)
    sq_b = torch.rand(N, N, device=dev, dtype=dtype)
    sq_o = torch.empty(N, N, device=dev, dtype=dtype)
    row("square", N, N, N, "forward", time_cuda(lambda: torch.mm(sq_a, sq_b.t(), out=sq_o), a.runs, 2))
    del sq_a, sq_b, sq_o
    # The bandwidth reference: a plain copy of the array size `wgpt bench --micro` uses.
    n = a.copy_floats
    src = torch.rand(n, device=dev)
    dst = torch.empty_like(src)
    ms = time_cuda(lambda: dst.copy_(src), a.runs, 2)
    print(f"memory {'copy':<16s} {8.0 * n * 1e-6:10.1f} {ms:10.3f} {8.0 * n / (ms * 1e-3) * 1e-9:9.1f}", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mode", choices=["fp32", "tf32", "bf16", "f16"], default="fp32",
                   help="f16: --matmul only (float16 matmuls on tensor cores)")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--channels", type=int, default=768)
    p.add_argument("--vocab", type=int, default=50257)
    p.add_argument("--vocab-pad", type=int, default=None,
                   help="padded vocabulary; default: --vocab rounded up to a multiple of 128, as wgpt (50257: 50304)")
    p.add_argument("--steps", type=int, default=10, help="timed steps")
    p.add_argument("--warmup", type=int, default=2, help="warm-up steps")
    p.add_argument("--compile", action="store_true", help="torch.compile the model (off by default)")
    p.add_argument("--profile", action="store_true",
                   help="then 3 steps under torch.profiler: the GPU time a step of each kernel, matmuls and attention summed")
    p.add_argument("--matmul", action="store_true", help="time the matmuls of `wgpt bench --micro` instead")
    p.add_argument("--rows", type=int, default=4096, help="--matmul: rows N (B*T)")
    p.add_argument("--runs", type=int, default=10, help="--matmul: timed runs behind each median")
    p.add_argument("--copy-floats", type=int, default=64 << 20, help="--matmul: floats of the copy reference")
    a = p.parse_args()
    if a.vocab_pad is None:
        a.vocab_pad = (a.vocab + 127) // 128 * 128
    for k in ("batch", "seq", "layers", "heads", "channels", "vocab", "steps", "rows", "runs", "copy_floats"):
        if getattr(a, k) <= 0:
            sys.exit(f"pytorch_gpt2.py: --{k.replace('_', '-')} must be positive, got {getattr(a, k)}")
    if a.warmup < 0 or a.channels % a.heads or a.vocab_pad < a.vocab:
        sys.exit(f"pytorch_gpt2.py: need --warmup >= 0 (got {a.warmup}), --channels ({a.channels}) a multiple of "
                 f"--heads ({a.heads}) and --vocab-pad ({a.vocab_pad}) >= --vocab ({a.vocab})")
    if not torch.cuda.is_available():
        sys.exit(f"pytorch_gpt2.py: torch {torch.__version__} sees no CUDA device")
    if a.mode == "f16" and not a.matmul:
        sys.exit("pytorch_gpt2.py: --mode f16 is for --matmul (training compares with bf16 autocast)")
    if a.matmul:
        bench_matmul(a)
    else:
        bench_step(a)


if __name__ == "__main__":
    main()
