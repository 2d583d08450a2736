#!/usr/bin/env python3
"""Writes jax.random's outputs for the calls core's `random` offers, as a JSON fixture.

    python3 jax_random_fixture.py [out.json]        (default: ../test/fixtures/jax_random.json)

Needs JAX (any platform; the PRNG is bit-exact across CPU/GPU/TPU for the integer parts). Uses
JAX's defaults: threefry2x32, x64 disabled, jax_threefry_partitionable as the installed JAX sets
it (True since 0.5; the fixture records the value). Each case is a declarative spec (op name and
arguments) that packages/core/test/jaxRandomFixture.test.ts replays with tpukit's `random`, so
the two sides cannot drift apart. Outputs are stored exactly: integers as numbers, floats as the
hex of their bit patterns (float32: 8 hex digits, bfloat16: 4), booleans as 0/1.

`--dry` prints the specs without importing JAX (to check this script where JAX is absent).
"""
from __future__ import annotations

import json
import os
import sys

# (name, spec). `seed` makes the key random.key(seed); `path` then applies splits / fold-ins
# ([["split", n, i], ["fold_in", d]]) to reach the key the op uses.
SEEDS = [0, 1, 42, 1701, -1, -2, 2147483647, 2147483647 + 100, -2147483648 - 100, 4294967295]


def specs():
    out = []
    for s in SEEDS:
        out.append({"op": "key", "seed": s})
    for s in (0, 42):
        for n in (2, 3, 7):
            out.append({"op": "split", "seed": s, "num": n})
        out.append({"op": "split", "seed": s, "num": [2, 3]})
        for d in (0, 1, 12345, 4294967295):
            out.append({"op": "fold_in", "seed": s, "data": d})
    out.append({"op": "split", "seed": 7, "num": 1})
    chain = [["split", 2, 1], ["fold_in", 7], ["split", 3, 2]]
    for shape, dt in [([], "uint32"), ([1], "uint32"), ([7], "uint32"), ([3, 5], "uint32"), ([2, 3, 4], "uint32"),
                      ([9], "uint8"), ([4, 3], "uint8"), ([], "uint8")]:
        out.append({"op": "bits", "seed": 3, "shape": shape, "dtype": dt})
    out.append({"op": "bits", "seed": 11, "path": chain, "shape": [5], "dtype": "uint32"})
    for dt in ("float32", "bfloat16"):
        for shape, lo, hi in [([], 0, 1), ([7], 0, 1), ([3, 5], -2.5, 3.0), ([33], 10, 11), ([4, 4], -1e-3, 1e-3),
                              ([5], 3, -3)]:
            out.append({"op": "uniform", "seed": 5, "shape": shape, "dtype": dt, "minval": lo, "maxval": hi})
        for shape in ([], [7], [3, 5], [64]):
            out.append({"op": "normal", "seed": 6, "shape": shape, "dtype": dt})
        out.append({"op": "truncated_normal", "seed": 8, "lower": -2.0, "upper": 1.5, "shape": [3, 7], "dtype": dt})
        out.append({"op": "gumbel", "seed": 9, "shape": [11], "dtype": dt})
        out.append({"op": "exponential", "seed": 10, "shape": [11], "dtype": dt})
        out.append({"op": "laplace", "seed": 12, "shape": [11], "dtype": dt})
        out.append({"op": "logistic", "seed": 13, "shape": [11], "dtype": dt})
    out.append({"op": "uniform", "seed": 15, "path": chain, "shape": [6], "dtype": "float32", "minval": 0, "maxval": 1})
    out.append({"op": "truncated_normal", "seed": 8, "lower": 0.5, "upper": 4.0, "shape": [], "dtype": "float32"})
    out.append({"op": "pareto", "seed": 16, "b": 3.0, "shape": [9], "dtype": "float32"})
    out.append({"op": "weibull_min", "seed": 17, "scale": 2.0, "concentration": 1.5, "shape": [9], "dtype": "float32"})
    for shape, lo, hi, dt in [([], 0, 10, "int32"), ([17], 0, 10, "int32"), ([3, 5], -5, 5, "int32"),
                              ([9], -2147483648, 2147483647, "int32"), ([9], 0, 1 << 30, "int32"),
                              ([6], 3, 3, "int32"), ([6], 7, 2, "int32"), ([12], 0, 200, "uint8"),
                              ([12], -100, 100, "int8"), ([8], 0, 2000000000, "uint32"), ([8], 5, 300, "uint32")]:
        out.append({"op": "randint", "seed": 20, "shape": shape, "minval": lo, "maxval": hi, "dtype": dt})
    for p, shape in [(0.5, [16]), (0.1, [3, 5]), (0.9, [])]:
        out.append({"op": "bernoulli", "seed": 21, "p": p, "shape": shape})
    for n in (1, 2, 5, 10, 100):
        out.append({"op": "permutation", "seed": 22, "x": n})
    out.append({"op": "permutation", "seed": 23, "x": "arange(3x4)", "axis": 0})
    out.append({"op": "permutation", "seed": 23, "x": "arange(3x4)", "axis": 1})
    out.append({"op": "permutation", "seed": 23, "x": "arange(3x4)", "axis": 1, "independent": True})
    out.append({"op": "choice", "seed": 24, "a": 10, "shape": [6]})
    out.append({"op": "choice", "seed": 24, "a": 10, "shape": [6], "replace": False})
    out.append({"op": "choice", "seed": 24, "a": 5, "shape": [8], "p": [0.1, 0.2, 0.3, 0.15, 0.25]})
    out.append({"op": "choice", "seed": 24, "a": 5, "shape": [3], "replace": False, "p": [0.1, 0.2, 0.3, 0.15, 0.25]})
    out.append({"op": "choice", "seed": 25, "a": "arange(3x4)", "shape": [2], "axis": 1})
    out.append({"op": "categorical", "seed": 26, "logits": [[0.0, 1.0, 2.0, -1.0], [3.0, 0.0, 0.0, 0.5]], "axis": -1})
    out.append({"op": "categorical", "seed": 26, "logits": [[0.0, 1.0, 2.0, -1.0], [3.0, 0.0, 0.0, 0.5]], "axis": -1,
                "shape": [5, 2]})
    out.append({"op": "categorical", "seed": 27, "logits": [[0.0, 1.0, 2.0, -1.0], [3.0, 0.0, 0.0, 0.5]], "axis": 0})
    return out


def run(jax, jnp, np, sp):
    r = jax.random

    def make_key():
        k = r.PRNGKey(sp["seed"])
        for step in sp.get("path", []):
            k = r.split(k, step[1])[step[2]] if step[0] == "split" else r.fold_in(k, step[1])
        return k

    def arr(x):
        if isinstance(x, str) and x.startswith("arange("):
            dims = [int(d) for d in x[7:-1].split("x")]
            return jnp.arange(int(np.prod(dims)), dtype=jnp.int32).reshape(dims)
        return x

    op = sp["op"]
    dt = getattr(jnp, sp["dtype"]) if "dtype" in sp else None
    if op == "key":
        return r.PRNGKey(sp["seed"])
    k = make_key()
    if op == "split":
        num = sp["num"]
        return r.split(k, tuple(num) if isinstance(num, list) else num)
    if op == "fold_in":
        return r.fold_in(k, sp["data"])
    if op == "bits":
        return r.bits(k, tuple(sp["shape"]), dt)
    if op == "uniform":
        return r.uniform(k, tuple(sp["shape"]), dt, sp["minval"], sp["maxval"])
    if op in ("normal", "gumbel", "exponential", "laplace", "logistic"):
        return getattr(r, op)(k, tuple(sp["shape"]), dt)
    if op == "truncated_normal":
        return r.truncated_normal(k, sp["lower"], sp["upper"], tuple(sp["shape"]), dt)
    if op == "pareto":
        return r.pareto(k, sp["b"], tuple(sp["shape"]), dt)
    if op == "weibull_min":
        return r.weibull_min(k, sp["scale"], sp["concentration"], tuple(sp["shape"]), dt)
    if op == "randint":
        return r.randint(k, tuple(sp["shape"]), sp["minval"], sp["maxval"], dt)
    if op == "bernoulli":
        return r.bernoulli(k, sp["p"], tuple(sp["shape"]))
    if op == "permutation":
        return r.permutation(k, arr(sp["x"]), axis=sp.get("axis", 0), independent=sp.get("independent", False))
    if op == "choice":
        p = jnp.asarray(sp["p"], jnp.float32) if "p" in sp else None
        return r.choice(k, arr(sp["a"]), tuple(sp["shape"]), sp.get("replace", True), p, sp.get("axis", 0))
    if op == "categorical":
        shape = tuple(sp["shape"]) if "shape" in sp else None
        return r.categorical(k, jnp.asarray(sp["logits"], jnp.float32), sp["axis"], shape)
    raise ValueError(f"unknown op {op}")


def encode(np, x):
    x = np.asarray(x)
    name = str(x.dtype)
    flat = x.reshape(-1)
    if name == "float32":
        vals = [f"{v:08x}" for v in flat.view(np.uint32).tolist()]
    elif name == "bfloat16":
        vals = [f"{v:04x}" for v in flat.view(np.uint16).tolist()]
    elif name == "bool":
        vals = [int(v) for v in flat.tolist()]
    else:
        vals = [int(v) for v in flat.tolist()]
    return {"dtype": name, "shape": list(x.shape), "values": vals}


def main(argv):
    dry = "--dry" in argv
    args = [a for a in argv if not a.startswith("--")]
    path = args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "fixtures", "jax_random.json")
    cases = specs()
    if dry:
        print(json.dumps(cases, indent=1))
        print(f"{len(cases)} cases (dry run, JAX not imported)", file=sys.stderr)
        return 0
    import jax
    import jax.numpy as jnp
    import numpy as np

    out = []
    errors = 0
    for sp in cases:
        try:
            out.append({**sp, "out": encode(np, run(jax, jnp, np, sp))})
        except Exception as e:  # a call JAX rejects is recorded, not fatal
            errors += 1
            out.append({**sp, "error": f"{type(e).__name__}: {e}"[:300]})
    doc = {
        "generator": "packages/core/tools/jax_random_fixture.py",
        "jax": jax.__version__,
        "platform": jax.devices()[0].platform,
        "threefry_partitionable": bool(jax.config.jax_threefry_partitionable),
        "x64": bool(jax.config.jax_enable_x64),
        "cases": out,
    }
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")
    print(f"jax_random_fixture: {len(out)} cases ({errors} rejected by JAX) -> {path} "
          f"(jax {jax.__version__}, {doc['platform']}, partitionable={doc['threefry_partitionable']})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
