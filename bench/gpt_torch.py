"""PyTorch peer of `pnpm bench:gpt` (bench/gpt.bench.ts): the same reference GPT (V=256, d=128,
L=4, H=4, MLP 512 tanh-GELU, T=128, B=16, pre-LayerNorm with bias, learned positions, tied LM head,
one-hot embedding and loss matmuls so the FLOPs match), f32, eager, torch.optim.Adam(lr 3e-4).

Usage: python3 gpt_torch.py THREADS STEPS. Trains 2 warm-up steps, then times STEPS steps on
random byte batches (throughput does not depend on the text) and prints one JSON line:
{"tokensPerSecond": ..., "tokensPerCpuSecond": ..., "loss": ...} (CPU time of the
process, all threads).
"""
import json
import math
import sys
import time

import torch
import torch.nn.functional as F

V, D, L, H, T, B = 256, 128, 4, 4, 128, 16
DH, FF = D // H, 4 * D


def main():
    threads, steps = int(sys.argv[1]), int(sys.argv[2])
    torch.set_num_threads(threads)
    torch.manual_seed(0)

    def lin(i, o, s=0.02):
        return [torch.nn.Parameter(torch.randn(i, o) * s), torch.nn.Parameter(torch.zeros(o))]

    def ln():
        return [torch.nn.Parameter(torch.ones(D)), torch.nn.Parameter(torch.zeros(D))]

    wte = torch.nn.Parameter(torch.randn(V, D) * 0.02)
    wpe = torch.nn.Parameter(torch.randn(T, D) * 0.02)
    layers = [dict(ln1=ln(), q=lin(D, D), k=lin(D, D), v=lin(D, D), o=lin(D, D), ln2=ln(), fc=lin(D, FF), proj=lin(FF, D)) for _ in range(L)]
    lnf = ln()
    params = [wte, wpe, *lnf] + [p for l in layers for pair in l.values() for p in pair]
    assert sum(p.numel() for p in params) == 842_496, sum(p.numel() for p in params)
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))

    def layer_norm(x, g):
        return F.layer_norm(x, (D,), g[0], g[1], 1e-5)

    def dense(x, w):
        return x @ w[0] + w[1]

    def heads(x):
        return x.view(B, T, H, DH).transpose(1, 2)

    def loss_fn(x, y):
        h = F.one_hot(x, V).float() @ wte + wpe
        for l in layers:
            a = layer_norm(h, l["ln1"])
            q, k, v = heads(dense(a, l["q"])), heads(dense(a, l["k"])), heads(dense(a, l["v"]))
            s = (q @ k.transpose(-1, -2)) * (1 / math.sqrt(DH))
            att = torch.softmax(s.masked_fill(~mask, -1e9), -1) @ v
            h = h + dense(att.transpose(1, 2).reshape(B, T, D), l["o"])
            h = h + dense(F.gelu(dense(layer_norm(h, l["ln2"]), l["fc"]), approximate="tanh"), l["proj"])
        logp = torch.log_softmax(layer_norm(h, lnf) @ wte.t(), -1)
        return -(logp * F.one_hot(y, V).float()).sum(-1).mean()

    opt = torch.optim.Adam(params, lr=3e-4, betas=(0.9, 0.999), eps=1e-8)
    g = torch.Generator().manual_seed(1)

    def step():
        xy = torch.randint(0, V, (B, T + 1), generator=g)
        loss = loss_fn(xy[:, :T], xy[:, 1:])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.item()

    for _ in range(2):
        step()
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(steps):
        loss = step()
    secs, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(json.dumps({"tokensPerSecond": steps * B * T / secs, "tokensPerCpuSecond": steps * B * T / cpu, "loss": loss}))


main()
