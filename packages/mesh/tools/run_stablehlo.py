#!/usr/bin/env python3
"""Run a StableHLO module exported by tpukit with JAX/XLA on the devices JAX finds.

tpukit's `jit(f, {inShardings, outShardings}).lower(...).asStableHlo()` writes a module whose
arguments and results carry GSPMD shardings (`mhlo.sharding = "{devices=[2,1]0,1}"`) and
whose module carries `mhlo.num_partitions`. This script compiles that module with XLA's SPMD
partitioner (as `jax.jit` does after lowering), places each input with the sharding its
argument declares, runs it, and prints or saves the results, optionally comparing them with
the results tpukit computed.

    python3 run_stablehlo.py module.mlir [--inputs in.npz] [--expect out.npz] [--out got.npz]

`--inputs` holds arrays `arg0`, `arg1`, ... (default: seeded standard-normal float inputs,
zeros for integer ones). `--expect` holds `out0`, ... to compare with (rtol/atol 1e-5).

Status: written against JAX's internal compile path (jax._src.compiler, the same entry
points jax.jit uses) with fallbacks for older jaxlib spellings. It has NOT been run against a
real JAX here (no JAX or accelerator was available); treat it as unverified.
"""
from __future__ import annotations

import argparse
import re
import sys

import numpy as np

MLIR_DTYPES = {"f32": np.float32, "bf16": "bfloat16", "f16": np.float16, "i32": np.int32,
               "ui32": np.uint32, "i8": np.int8, "ui8": np.uint8, "i1": np.bool_}


def parse_tensor(t: str):
    """`tensor<2x3xf32>` -> ((2, 3), 'f32')."""
    m = re.fullmatch(r"tensor<((?:\d+x)*)(\w+)>", t.strip())
    if not m:
        raise ValueError(f"run_stablehlo: cannot read tensor type {t!r}")
    dims = tuple(int(d) for d in m.group(1).split("x") if d)
    return dims, m.group(2)


def parse_signature(text: str):
    """Argument and result types and shardings of @main."""
    m = re.search(r"func\.func public @main\((.*?)\) -> \((.*?)\) \{", text, re.S)
    if not m:
        raise ValueError("run_stablehlo: no `func.func public @main(...) -> (...)` in the module")
    item = re.compile(r"(?:%arg\d+: )?(tensor<[^>]*>)(?: \{mhlo\.sharding = \"([^\"]*)\"\})?")
    args = [(parse_tensor(t), s or "{replicated}") for t, s in item.findall(m.group(1))]
    results = [(parse_tensor(t), s or "{replicated}") for t, s in item.findall(m.group(2))]
    n = re.search(r"mhlo\.num_partitions = (\d+)", text)
    return args, results, int(n.group(1)) if n else 1


def named_sharding(jax, hlo: str, rank: int, devices):
    """The NamedSharding whose tile assignment is `hlo` (V1 `{devices=[..]ids}` or `{replicated}`)."""
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    if hlo == "{replicated}":
        return NamedSharding(Mesh(np.array(devices), ("r",)), PartitionSpec())
    m = re.fullmatch(r"\{devices=\[([\d,]+)\]([\d,]+)( last_tile_dim_replicate)?\}", hlo)
    if not m:
        raise ValueError(f"run_stablehlo: sharding {hlo!r} is not a form this runner reads")
    dims = [int(d) for d in m.group(1).split(",")]
    order = [int(d) for d in m.group(2).split(",")]
    # Mesh axis a<k> per data dimension (plus the replication axis): device at mesh position
    # (i0, ..., ik[, r]) holds tile (i0, ..., ik), exactly the tile assignment.
    names = tuple(f"a{k}" for k in range(rank)) + (("r",) if m.group(3) else ())
    mesh = Mesh(np.array([devices[i] for i in order], dtype=object).reshape(dims), names)
    return NamedSharding(mesh, PartitionSpec(*names[:rank]))


def compile_module(jax, text: str, devices):
    from jax._src import compiler
    from jax._src.interpreters import mlir
    from jax._src.lib import xla_client as xc
    from jax._src.lib.mlir import ir

    n = len(devices)
    backend = devices[0].client
    options = compiler.get_compile_options(num_replicas=1, num_partitions=n,
                                           device_assignment=np.array(devices, dtype=object).reshape(1, n),
                                           use_spmd_partitioning=True)
    with mlir.make_ir_context():
        module = ir.Module.parse(text)
        try:
            return compiler.backend_compile_and_load(backend, module, xc.DeviceList(tuple(devices)), options, [])
        except AttributeError:  # older jaxlib: one compile() that also loads
            return backend.compile(text, options)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("module")
    ap.add_argument("--inputs")
    ap.add_argument("--expect")
    ap.add_argument("--out")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)

    import jax

    text = open(a.module, encoding="utf-8").read()
    args, results, n = parse_signature(text)
    devices = jax.devices()
    if len(devices) < n:
        print(f"run_stablehlo: the module wants {n} partitions; JAX found {len(devices)} devices "
              f"({devices[0].platform}). On CPU set XLA_FLAGS=--xla_force_host_platform_device_count={n}.",
              file=sys.stderr)
        return 2
    devices = devices[:n]
    print(f"run_stablehlo: {n} partition(s) on {[str(d) for d in devices]}")

    feed = np.load(a.inputs) if a.inputs else None
    rng = np.random.default_rng(a.seed)
    inputs = []
    for k, ((shape, dt), hlo) in enumerate(args):
        dtype = MLIR_DTYPES.get(dt)
        if dtype is None:
            raise ValueError(f"run_stablehlo: argument {k} has element type {dt}, which this runner does not read")
        if feed is not None:
            x = np.asarray(feed[f"arg{k}"])
        elif np.issubdtype(np.dtype(dtype) if dtype != "bfloat16" else np.float32, np.floating):
            x = rng.standard_normal(shape).astype(np.float32)
        else:
            x = np.zeros(shape, dtype=dtype)
        if tuple(x.shape) != shape:
            raise ValueError(f"run_stablehlo: input arg{k} has shape {x.shape}; the module wants {shape}")
        x = jax.numpy.asarray(x, dtype=jax.numpy.bfloat16 if dtype == "bfloat16" else dtype)
        inputs.append(jax.device_put(x, named_sharding(jax, hlo, len(shape), devices)))

    exe = compile_module(jax, text, devices)
    res = exe.execute_sharded(inputs)
    pieces = res.disassemble_into_single_device_arrays()
    outs = []
    for k, (((shape, _), hlo), per_dev) in enumerate(zip(results, pieces)):
        s = named_sharding(jax, hlo, len(shape), devices)
        outs.append(np.asarray(jax.make_array_from_single_device_arrays(shape, s, list(per_dev))))
        print(f"out{k}: shape {shape} sharding {hlo}\n{outs[-1]}")
    if a.out:
        np.savez(a.out, **{f"out{k}": o for k, o in enumerate(outs)})
    if a.expect:
        want = np.load(a.expect)
        for k, o in enumerate(outs):
            if not np.allclose(o, want[f"out{k}"], rtol=1e-5, atol=1e-5):
                print(f"run_stablehlo: out{k} differs from {a.expect}", file=sys.stderr)
                return 1
        print(f"run_stablehlo: all {len(outs)} output(s) match {a.expect}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
