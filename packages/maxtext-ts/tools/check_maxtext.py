#!/usr/bin/env python3
"""maxtext-ts against JAX (FIDELITY.md, "maxtext-ts"): a JAX implementation of maxtext-ts's
decoder as its config defines it (src/model.ts), run on parameters restored with Orbax from the
checkpoints maxtext-ts wrote (write_fidelity_cases.ts), compared with what tpukit computed:

  logits and mean loss of a packed batch, the gradient of the loss, one train step (AdamW with
  global-norm clipping: once from tpukit's own gradients, which checks the optimizer, and once
  end to end from JAX's gradients), greedy decode (a full forward per token in JAX against
  maxtext-ts's KV-cache decoder, step-1 parameters), and the MFU FLOP count against a second
  transcription of MaxText's formula (a consistency check, see maxtext_tflops).

    python3 check_maxtext.py CASES_DIR [--json OUT.json] [--reference REF.json] [--dry]

--reference writes JAX's results in the form test/jaxReference.test.ts replays (sampled).

The JAX side uses jax.nn.dot_product_attention (implementation 'xla'), jax.nn.silu / gelu /
log_softmax, and optax for the optimizer when it is importable (else the same transforms written
out here, said in the log). Prints PASS / FAIL / ERROR / INFO lines.
"""
from __future__ import annotations

import json
import math
import os
import sys
import traceback

import numpy as np

RESULTS: list[dict] = []
REFERENCE: dict = {}


def report(status: str, name: str, detail: str, **extra) -> None:
    print(f"{status} {name}: {detail}", flush=True)
    RESULTS.append({"status": status, "name": name, "detail": detail, **extra})


# ---------------------------------------------------------------- MaxText's FLOP formula
def maxtext_tflops(c: dict) -> dict:
    """calculate_tflops_training_per_device, dense path (MaxText maxtext_utils.py), transcribed from
    shared/reference/jax-ecosystem.md 3.3: MaxText since PR #1988 (July 2025), which halves the
    causal attention FLOPs; earlier MaxText (e.g. October 2024) does not halve. src/flops.ts was
    written from the same reference, so this is a consistency check between two transcriptions
    (it catches a slip in either), not a comparison with MaxText's code."""
    B, S, D, F, h, L, V = (c[k] for k in ("per_device_batch_size", "max_target_length", "emb_dim", "mlp_dim", "head_dim", "num_decoder_layers", "vocab_size"))
    Hq, Hkv, A = c["num_query_heads"], c["num_kv_heads"], len(c["mlp_activations"])
    ffn1 = 2 * B * S * F * D * A
    ffn2 = 2 * B * S * F * D
    qkv = 2 * B * S * D * (Hq + 2 * Hkv) * h
    causal_attention = 4 * B * S**2 * Hq * h / 2
    projection = 2 * B * S * D * Hq * h
    embedding = 2 * B * S * D * V
    g = c.get("gradient_accumulation_steps", 1)
    lw = ((ffn1 + ffn2) * L + (qkv + projection) * L + embedding) * 3 / 10**12 * g
    at = causal_attention * L * 3 / 10**12 * g
    return {"total": lw + at, "learnableWeight": lw, "attention": at}


# ---------------------------------------------------------------- the model in JAX
def make_model(cfg: dict):
    import jax
    import jax.numpy as jnp

    dt = jnp.bfloat16 if cfg["dtype"] == "bfloat16" else jnp.float32
    prec = {"default": None, "high": jax.lax.Precision.HIGH, "highest": jax.lax.Precision.HIGHEST}[cfg["matmul_precision"]]
    eps = cfg["normalization_layer_epsilon"]
    N, K, H, D = cfg["num_query_heads"], cfg["num_kv_heads"], cfg["head_dim"], cfg["emb_dim"]
    llama = cfg["decoder_block"] == "llama2"

    def dense(x, w):
        return jnp.matmul(x, w.astype(dt), precision=prec)

    def norm(x, p):
        xf = x.astype(jnp.float32)
        if llama:  # MaxText RMSNorm: normalise in f32, cast, times the scale in the activation dtype
            y = (xf * jax.lax.rsqrt(jnp.mean(jnp.square(xf), axis=-1, keepdims=True) + eps)).astype(dt)
            return y * p["scale"].astype(dt)
        mean = jnp.mean(xf, axis=-1, keepdims=True)
        c = xf - mean
        y = c * jax.lax.rsqrt(jnp.mean(jnp.square(c), axis=-1, keepdims=True) + eps)
        return (y * p["scale"] + p["bias"]).astype(dt)

    def rope(x, positions):  # MaxText RotaryEmbedding (min_timescale 1): halves rotated
        half = H // 2
        fraction = 2 * jnp.arange(half, dtype=jnp.float32) / H
        timescale = cfg["rope_max_timescale"] ** fraction
        sinusoid = positions[:, :, None, None].astype(jnp.float32) / timescale
        sin, cos = jnp.sin(sinusoid), jnp.cos(sinusoid)
        f = x.astype(jnp.float32)
        first, second = f[..., :half], f[..., half:]
        return jnp.concatenate([first * cos - second * sin, second * cos + first * sin], axis=-1).astype(x.dtype)

    act = {"silu": jax.nn.silu, "gelu": jax.nn.gelu, "relu": jax.nn.relu, "linear": lambda v: v}

    def mlp(x, p):
        a = cfg["mlp_activations"]
        if len(a) == 2:
            h = act[a[0]](dense(x, p["wi_0"]["kernel"])) * act[a[1]](dense(x, p["wi_1"]["kernel"]))
        else:
            h = act[a[0]](dense(x, p["wi"]["kernel"]))
        return dense(h, p["wo"]["kernel"])

    def block(x, p, positions, attend):
        b, l = x.shape[:2]
        a = p["self_attention"]
        h = norm(x, p["pre_self_attention_layer_norm"])
        q = dense(h, a["query"]["kernel"]).reshape(b, l, N, H)
        k = dense(h, a["key"]["kernel"]).reshape(b, l, K, H)
        v = dense(h, a["value"]["kernel"]).reshape(b, l, K, H)
        if llama:
            q, k = rope(q, positions), rope(k, positions)
        att = attend(q, k, v)
        y = x + dense(att.reshape(b, l, N * H), a["out"]["kernel"])
        return y + mlp(norm(y, p["post_self_attention_layer_norm"]), p["mlp"])

    def embed(params, tokens, positions):
        x = jnp.take(params["token_embedder"]["embedding"], tokens, axis=0).astype(dt)
        if not llama:
            x = x + jnp.take(params["position_embedder"]["embedding"], positions, axis=0).astype(dt)
        return x

    def logits_of(params, x):
        y = norm(x, params["decoder"]["decoder_norm"])
        if cfg["logits_via_embedding"]:
            out = dense(y, params["token_embedder"]["embedding"].T) * (1 / math.sqrt(D))
        else:
            out = dense(y, params["decoder"]["logits_dense"]["kernel"])
        return out.astype(jnp.float32)

    def forward(params, tokens, segment_ids, positions):
        x = embed(params, tokens, positions)
        mask = (segment_ids[:, :, None] == segment_ids[:, None, :])[:, None]  # [B, 1, L, L]

        def attend(q, k, v):
            return jax.nn.dot_product_attention(q, k, v, mask=mask, is_causal=True, implementation="xla")

        def run(h, p):
            return block(h, p, positions, attend)

        if cfg["remat_policy"] != "none":
            pol = jax.checkpoint_policies.nothing_saveable if cfg["remat_policy"] == "full" else jax.checkpoint_policies.dots_saveable
            run = jax.checkpoint(run, policy=pol, prevent_cse=not cfg["scan_layers"])
        dec = params["decoder"]
        if cfg["scan_layers"]:
            x, _ = jax.lax.scan(lambda h, p: (run(h, p), None), x, dec["layers"])
        else:
            for l in range(cfg["num_decoder_layers"]):
                x = run(x, dec[f"layers_{l}"])
        return logits_of(params, x)

    def loss_sum(params, tokens, segment_ids, positions):
        L = tokens.shape[1] - 1
        seg_in, seg_out = segment_ids[:, :L], segment_ids[:, 1:]
        w = ((seg_in == seg_out) & (seg_out != 0)).astype(jnp.float32)
        logp = jax.nn.log_softmax(forward(params, tokens[:, :L], seg_in, positions[:, :L]))
        tok = jnp.take_along_axis(logp, tokens[:, 1:, None], axis=-1)[..., 0]
        return -jnp.sum(tok * w), jnp.sum(w)

    def loss(params, tokens, segment_ids, positions):
        s, w = loss_sum(params, tokens, segment_ids, positions)
        return s / jnp.maximum(w, 1)

    return {"forward": forward, "loss_sum": loss_sum, "loss": loss}


# ---------------------------------------------------------------- the optimizer
def make_optimizer(cfg: dict):
    """chain(clip_by_global_norm(t), adamw(constant lr, b1, b2, eps, eps_root, weight_decay))."""
    import jax
    import jax.numpy as jnp

    assert cfg["opt_type"] == "adamw" and cfg["lr_schedule_type"] == "constant", cfg
    lr, b1, b2, eps, eps_root, wd, clip = (cfg[k] for k in ("learning_rate", "adam_b1", "adam_b2", "adam_eps", "adam_eps_root", "adam_weight_decay", "gradient_clipping_threshold"))
    try:
        import optax

        opt = optax.chain(optax.clip_by_global_norm(clip), optax.adamw(lr, b1=b1, b2=b2, eps=eps, eps_root=eps_root, weight_decay=wd))

        def step(params, grads, mu, nu, count):
            state = opt.init(params)
            adam_state = state[1][0]._replace(count=jnp.asarray(count, jnp.int32), mu=mu, nu=nu)
            state = (state[0], (adam_state, *state[1][1:]))
            updates, new = opt.update(grads, state, params)
            return optax.apply_updates(params, updates), new[1][0].mu, new[1][0].nu

        return step, f"optax {optax.__version__}"
    except ImportError:
        pass
    tm = jax.tree_util.tree_map

    def step(params, grads, mu, nu, count):
        g = jnp.sqrt(sum(jnp.sum(jnp.square(x)) for x in jax.tree_util.tree_leaves(grads)))
        grads = tm(lambda t: jnp.where(g < clip, t, (t / g) * clip), grads)
        mu = tm(lambda m, t: (1 - b1) * t + b1 * m, mu, grads)
        nu = tm(lambda v, t: (1 - b2) * jnp.square(t) + b2 * v, nu, grads)
        return adamw_update_from_moments(cfg)(params, mu, nu, count + 1), mu, nu

    return step, "optax not importable: chain(clip_by_global_norm, adamw) written out as optax 0.2 defines it"


# ---------------------------------------------------------------- comparisons
def flat(tree, prefix=""):
    if isinstance(tree, dict):
        out = {}
        for k, v in tree.items():
            out.update(flat(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: np.asarray(tree, dtype=np.float32)}


def rel_err(a, b) -> float:
    return float(np.linalg.norm((a - b).ravel()) / max(np.linalg.norm(b.ravel()), 1e-30))


def check_flops(name: str, cfg: dict, tflops: dict) -> None:
    mt = maxtext_tflops(cfg)
    worst = max(abs(mt[k] - tflops[k]) / mt[k] for k in mt)
    report("PASS" if worst < 1e-12 else "FAIL", f"{name}", f"consistency with the transcribed MaxText formula (PR #1988 version): tpukit {tflops['total']:.9g} TFLOPs/step/device, formula {mt['total']:.9g} (rel diff {worst:.1e})")


def check_case(case_dir: str, tol: dict) -> None:
    import jax
    import jax.numpy as jnp
    import orbax.checkpoint as ocp

    info = json.load(open(os.path.join(case_dir, "case.json")))
    cfg, name = info["config"], info["name"]
    bf16 = cfg["dtype"] == "bfloat16"
    t = tol["bf16" if bf16 else "f32"]
    ctx = jax.default_matmul_precision("highest") if info["default_matmul_precision"] == "highest" else _null()
    z = np.load(os.path.join(case_dir, "out.npz"))
    plat = jax.devices()[0].platform

    # FLOPs: the case's own count against MaxText's formula.
    check_flops(f"{name} MFU FLOPs", cfg, info["tflops"])

    ck = os.path.join(case_dir, "ckpt")
    mgr = ocp.CheckpointManager(ck)
    steps = mgr.all_steps()
    s0 = ocp.StandardCheckpointer().restore(os.path.join(ck, "0", "items"))
    s1 = ocp.StandardCheckpointer().restore(os.path.join(ck, "1", "items"))
    report("PASS" if steps == [0, 1] and int(s0["step"]) == 0 and int(s1["step"]) == 1 else "FAIL", f"{name} Orbax restore", f"CheckpointManager.all_steps() {steps}; StandardCheckpointer restored items of steps 0 and 1 without a target (step leaf {int(s0['step'])}, {int(s1['step'])})")

    m = make_model(cfg)
    p0 = s0["params"]
    tokens, seg, pos = (jnp.asarray(z[k]) for k in ("tokens", "segment_ids", "positions"))
    L = tokens.shape[1] - 1
    with ctx:
        logits = np.asarray(jax.jit(m["forward"])(p0, tokens[:, :L], seg[:, :L], pos[:, :L]))
        lossv, grads = jax.jit(jax.value_and_grad(m["loss"]))(p0, tokens, seg, pos)
    # logits
    tl = z["logits"]
    d = np.abs(logits - tl)
    bound = t["logits_atol"] + t["logits_rtol"] * np.abs(logits)
    ok = bool(np.all(d <= bound))
    argmax_agree = float(np.mean(np.argmax(logits, -1) == np.argmax(tl, -1)))
    report("PASS" if ok else "FAIL", f"{name} logits [{plat}]", f"max |diff| {d.max():.3g} (worst ratio to tolerance {float((d / bound).max()):.3g}; atol {t['logits_atol']}, rtol {t['logits_rtol']}), argmax agrees on {argmax_agree:.1%} of positions", max_abs=float(d.max()))
    # loss
    lj, lt = float(lossv), float(z["loss"])
    rd = abs(lj - lt) / abs(lj)
    report("PASS" if rd <= t["loss_rtol"] else "FAIL", f"{name} loss [{plat}]", f"JAX {lj:.7f}, tpukit {lt:.7f} (rel diff {rd:.2e}, tolerance {t['loss_rtol']})", jax=lj, tpukit=lt)
    # gradients (per leaf, relative Frobenius error)
    gj = flat(jax.tree_util.tree_map(np.asarray, grads))  # stacked layers stay stacked, as tpukit's keys
    gt = {k[len("grad."):]: z[k] for k in z.files if k.startswith("grad.")}
    if set(gj) != set(gt):
        report("FAIL", f"{name} gradient [{plat}]", f"leaf names differ: JAX only {sorted(set(gj) - set(gt))}, tpukit only {sorted(set(gt) - set(gj))}")
    else:
        errs = {k: rel_err(gt[k], gj[k]) for k in gj}
        wk = max(errs, key=errs.get)
        report("PASS" if errs[wk] <= t["grad_rel"] else "FAIL", f"{name} gradient [{plat}]", f"{len(errs)} leaves, worst relative error {errs[wk]:.2e} ({wk}), median {float(np.median(list(errs.values()))):.2e}; tolerance {t['grad_rel']}", worst=errs[wk])

    # one train step
    step, opt_src = make_optimizer(cfg)
    p1t = flat(s1["params"])
    mu1t = flat(s1["optState"][1][0]["mu"])
    nu1t = flat(s1["optState"][1][0]["nu"])
    zeros = jax.tree_util.tree_map(jnp.zeros_like, p0)
    with ctx:
        (sj, wj), gsum = jax.jit(jax.value_and_grad(m["loss_sum"], has_aux=True))(p0, tokens, seg, pos)
        gstep = jax.tree_util.tree_map(lambda g: g / jnp.maximum(wj, 1), gsum)
        raw_norm = float(jnp.sqrt(sum(jnp.sum(jnp.square(g)) for g in jax.tree_util.tree_leaves(gstep))))
        rn_t = float(z["step_raw_grad_norm"])
        report("PASS" if abs(raw_norm - rn_t) / raw_norm <= t["raw_norm_rel"] else "FAIL", f"{name} train step raw grad norm [{plat}]", f"JAX {raw_norm:.6g}, tpukit {rn_t:.6g} (rel {abs(raw_norm - rn_t) / raw_norm:.1e}, tolerance {t['raw_norm_rel']}); step loss tpukit {float(z['step_loss']):.7f} vs JAX {float(sj / max(float(wj), 1)):.7f}")
        # (a) the optimizer alone: tpukit's gradients (of the step-0 mean loss) through optax
        gt_tree = _tree_like(p0, gt)
        _, mua, nua = jax.jit(step)(p0, gt_tree, zeros, zeros, 0)
        # the update from tpukit's own moments (exact inputs: no gradient rounding in between)
        pa = jax.jit(adamw_update_from_moments(cfg))(p0, s1["optState"][1][0]["mu"], s1["optState"][1][0]["nu"], 1)
    pa, mua, nua = flat(pa), flat(mua), flat(nua)
    worst_p = max(float(np.abs(pa[k] - p1t[k]).max()) for k in pa)
    worst_mu = max(max(rel_err(mu1t[k], mua[k]), rel_err(nu1t[k], nua[k])) for k in mua)
    # The moments come from the step's own gradient (of the summed loss under jit, then divided by
    # the weights); the dumped one is the mean loss's (eager): in f32 they agree to rounding, in bf16
    # the backward's bf16 roundings differ with the cotangent's scale (1.2-1.3% measured, as large
    # as JAX vs tpukit), so bf16 cases compare the moments at the gradient tolerance. The update is
    # computed from tpukit's checkpointed moments and compared absolutely.
    ok = worst_p <= t["opt_param_atol"] and worst_mu <= t["opt_mu_rel"]
    report("PASS" if ok else "FAIL", f"{name} optimizer [{plat}]", f"clip + moments from tpukit's gradient by {opt_src}: mu / nu worst relative error {worst_mu:.2e} (tolerance {t['opt_mu_rel']}); parameters updated from tpukit's step-1 moments (optax's adamw formula): max |diff| {worst_p:.2e} (tolerance {t['opt_param_atol']})")
    # (b) end to end: JAX's gradients through the optimizer, against the checkpointed step
    with ctx:
        pb, mub, nub = jax.jit(step)(p0, gstep, zeros, zeros, 0)
    pb, mub, nub = flat(pb), flat(mub), flat(nub)
    dp = {k: float(np.abs(pb[k] - p1t[k]).max()) for k in pb}
    dmu = {k: rel_err(mu1t[k], mub[k]) for k in mub}
    wk = max(dmu, key=dmu.get)
    # nu is (1 - b2) g^2: twice the gradient's relative error
    dnu = {k: rel_err(nu1t[k], nub[k]) for k in nub}
    wn = max(dnu, key=dnu.get)
    big = sum(int(np.sum(np.abs(pb[k] - p1t[k]) > t["e2e_param_atol"])) for k in pb)
    total = sum(v.size for v in pb.values())
    ok = dmu[wk] <= t["grad_rel"] and dnu[wn] <= 2 * t["grad_rel"] and big <= t["e2e_param_frac"] * total
    report("PASS" if ok else "FAIL", f"{name} train step end to end [{plat}]", f"mu worst relative {dmu[wk]:.2e} ({wk}; tolerance {t['grad_rel']}), nu {dnu[wn]:.2e} ({wn}; tolerance {2 * t['grad_rel']}); params after the step max |diff| {max(dp.values()):.2e}, {big}/{total} elements beyond {t['e2e_param_atol']} (allowed {t['e2e_param_frac']:.1%}: Adam's first step is lr * g / (|g| + eps), so a gradient near 0 whose sign differs moves a parameter by up to 2 lr)")

    # greedy decode: JAX's own greedy trajectory (a full forward per token) on the step-1
    # parameters, then tpukit's KV-cache tokens compared with it up to the first difference
    pN = s1["params"]
    prompts, lengths, dtok = z["decode_prompts"], z["decode_lengths"], z["decode_tokens"]
    fwd = jax.jit(m["forward"])
    n_new = dtok.shape[1]
    S = cfg["max_target_length"]
    jax_tokens, jax_gaps = [], []
    lines, all_ok, agree = [], True, 0
    with ctx:
        for b in range(prompts.shape[0]):
            seq = [int(x) for x in prompts[b, : lengths[b]]]
            toks_b, gaps_b, margins = [], [], []
            for i in range(n_new):
                # one shape for every call (one compilation): the sequence right-padded to S; causal
                # attention keeps the padding out of the logits at the last real position
                toks = jnp.asarray([seq + [0] * (S - len(seq))], jnp.int32)
                lg = np.asarray(fwd(pN, toks, jnp.ones_like(toks), jnp.arange(S, dtype=jnp.int32)[None]))[0, len(seq) - 1]
                nxt = int(np.argmax(lg))
                top = np.sort(lg)[::-1]
                toks_b.append(nxt)
                gaps_b.append(float(top[0] - top[1]))
                margins.append(float(lg[nxt] - lg[int(dtok[b, i])]))
                seq.append(nxt)
            jax_tokens.append(toks_b)
            jax_gaps.append(gaps_b)
            for i in range(n_new):
                if toks_b[i] == int(dtok[b, i]):
                    agree += 1
                    continue
                near = margins[i] <= t["decode_margin"]
                all_ok = all_ok and near
                lines.append(f"slot {b} step {i}: JAX {toks_b[i]}, tpukit {int(dtok[b, i])}, JAX logit margin {margins[i]:.3g} ({'a near tie' if near else 'NOT a near tie'}); rest of slot not compared")
                break
    report("PASS" if all_ok else "FAIL", f"{name} greedy decode [{plat}]", f"{agree}/{prompts.shape[0] * n_new} tokens equal to JAX's full-forward greedy decode ({prompts.shape[0]} slots x {n_new} new tokens; {'; '.join(lines) or 'all equal'})", agree=agree)

    # what CI replays (test/jaxReference.test.ts): JAX's results, sampled where large
    def sample(a, n):
        """n elements at (i * (size - 1)) // (n - 1) of the flattened array (integer arithmetic, so
        the test computes the same indices), 7 significant digits, and the full array's norm."""
        a = np.asarray(a, np.float32).ravel()
        n = min(n, a.size)
        idx = (np.arange(n, dtype=np.int64) * (a.size - 1)) // max(n - 1, 1)
        return {"size": int(a.size), "values": [float(f"{v:.7g}") for v in a[idx]], "norm": float(f"{np.linalg.norm(a):.7g}")}

    REFERENCE.setdefault(name, {})[plat] = {
        "loss": float(f"{lj:.8g}"),
        "step_raw_grad_norm": float(f"{raw_norm:.8g}"),
        "logits": sample(logits, 256),
        "grads": {k: sample(v, 32) for k, v in sorted(gj.items())},
        "params_after_step": {k: sample(v, 32) for k, v in sorted(pb.items())},
        # Adam's moments after the step from JAX's gradients (the first update does not depend on
        # b1 / b2; the moments do)
        "mu_after_step": {k: sample(v, 32) for k, v in sorted(mub.items())},
        "nu_after_step": {k: sample(v, 32) for k, v in sorted(nub.items())},
        "decode_tokens": jax_tokens,
        "decode_top2_gap": jax_gaps,
    }


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def _tree_like(p0: dict, flat_vals: dict):
    """tpukit's flat gradient dict ('.'-joined paths) in the parameter tree's structure."""
    import jax.numpy as jnp

    def build(t, prefix):
        if isinstance(t, dict):
            return {k: build(v, f"{prefix}{k}.") for k, v in t.items()}
        return jnp.asarray(flat_vals[prefix[:-1]])

    return build(p0, "")


def adamw_update_from_moments(cfg: dict):
    """optax.adamw's parameter update given the moments after `count` steps (constant lr)."""
    import jax
    import jax.numpy as jnp

    lr, b1, b2, eps, eps_root, wd = (cfg[k] for k in ("learning_rate", "adam_b1", "adam_b2", "adam_eps", "adam_eps_root", "adam_weight_decay"))

    def f(params, mu, nu, count):
        u = jax.tree_util.tree_map(lambda m, v: (m / (1 - b1**count)) / (jnp.sqrt(v / (1 - b2**count) + eps_root) + eps), mu, nu)
        return jax.tree_util.tree_map(lambda p, x: p + (-lr) * (x + wd * p), params, u)

    return f


# Tolerances (see FIDELITY.md): f32 cases run every matmul at HIGHEST on both sides, so only
# summation order differs; bf16 cases round activations to bf16 after each matmul (f32
# accumulation on both sides), and one bf16 ulp is 2^-8 relative: a rounding that falls the
# other way early in the network moves a logit by ~1e-2. The scalars (mean loss, the step's raw
# gradient norm) average over many elements and get their own, tighter tolerances: a 3% error in
# the fused attention kernel's scale stays inside the per-leaf gradient tolerance of the bf16
# cases but not inside these (review of fid12). Worst observed (H200 and CPU, JAX 0.11.2):
# bf16 loss 1.9e-4, raw norm 5.6e-4; f32 gradients ~1e-6.
TOL = {
    "f32": {"logits_atol": 2e-5, "logits_rtol": 1e-4, "loss_rtol": 1e-5, "raw_norm_rel": 1e-5, "grad_rel": 1e-5, "opt_param_atol": 1e-6, "opt_mu_rel": 1e-5, "e2e_param_atol": 1e-5, "e2e_param_frac": 0.001, "decode_margin": 1e-4},
    "bf16": {"logits_atol": 0.1, "logits_rtol": 0.02, "loss_rtol": 5e-4, "raw_norm_rel": 1.5e-3, "grad_rel": 5e-2, "opt_param_atol": 1e-6, "opt_mu_rel": 5e-2, "e2e_param_atol": 1e-3, "e2e_param_frac": 0.02, "decode_margin": 0.1},
}


USAGE = "usage: check_maxtext.py CASES_DIR [--json OUT.json] [--reference REF.json] [--dry]"


def main(argv) -> int:
    if not argv or argv[0].startswith("--"):
        print(USAGE, file=sys.stderr)
        return 2
    for flag in ("--json", "--reference"):
        if flag in argv and argv.index(flag) + 1 >= len(argv):
            print(f"check_maxtext.py: {flag} needs a file name\n{USAGE}", file=sys.stderr)
            return 2
    root = argv[0]
    out_json = argv[argv.index("--json") + 1] if "--json" in argv else None
    cases = sorted(d for d in os.listdir(root) if os.path.exists(os.path.join(root, d, "case.json")))
    if "--dry" in argv:
        print(f"maxtext-ts cases in {root}: {cases}")
        return 0
    for mod in ("jax", "orbax.checkpoint", "optax", "flax", "grain"):
        try:
            mm = __import__(mod, fromlist=["_"])
            print(f"INFO import {mod}: {getattr(mm, '__version__', 'ok')}")
        except Exception as e:  # noqa: BLE001
            print(f"INFO import {mod}: not importable ({type(e).__name__}: {e})")
    import jax

    print(f"INFO jax.devices() {jax.devices()}")
    fl = os.path.join(root, "flops.json")
    if os.path.exists(fl):
        for name, c in json.load(open(fl)).items():
            check_flops(f"MFU FLOPs {name}", c["config"], c["tflops"])
    for c in cases:
        try:
            check_case(os.path.join(root, c), TOL)
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            report("ERROR", c, f"{type(e).__name__}: {e}")
    n = {s: sum(r["status"] == s for r in RESULTS) for s in ("PASS", "FAIL", "ERROR")}
    print(f"maxtext-ts: {n['PASS']} PASS, {n['FAIL']} FAIL, {n['ERROR']} ERROR")
    if out_json:
        json.dump(RESULTS, open(out_json, "w"), indent=1)
    if "--reference" in argv:
        import jax

        ref = {"jax": jax.__version__, "device": str(jax.devices()[0].device_kind), "tolerances": TOL, "cases": REFERENCE}
        json.dump(ref, open(argv[argv.index("--reference") + 1], "w"))
    return 1 if n["FAIL"] or n["ERROR"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
