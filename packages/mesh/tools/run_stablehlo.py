#!/usr/bin/env python3
"""Run a StableHLO module exported by tpukit with JAX/XLA on the devices JAX finds.

tpukit's `jit(f, {inShardings, outShardings}).lower(...).asStableHlo()` writes a module whose
arguments and results carry GSPMD shardings (`mhlo.sharding = "{devices=[2,1]0,1}"`) and
whose module carries `mhlo.num_partitions`. This script compiles that module with XLA's SPMD
partitioner (as `jax.jit` does after lowering), places each input with the sharding its
argument declares, runs it, and prints or saves the results, optionally comparing them with
the results tpukit computed.

    python3 run_stablehlo.py module.mlir [--inputs in.npz] [--expect out.npz] [--out got.npz]
                             [--rtol 1e-5] [--atol 1e-5]

`--inputs` holds arrays `arg0`, `arg1`, ... (default: seeded standard-normal float inputs,
zeros for integer ones); float inputs are converted to the element type the module declares
(bf16 included). `--expect` holds `out0`, ... to compare with. On CPU, a module with N
partitions needs `XLA_FLAGS=--xla_force_host_platform_device_count=N`.

Status (FIDELITY.md at the repo root has the runs): verified 2026-11-26 with jax/jaxlib 0.10.2
on CPU and 0.11.2 on CPU (1, 2 and 8 forced host devices) and an NVIDIA H200 (single-device
modules), through the first entry point below (`jax._src.compiler.backend_compile_and_load` on a
module parsed in JAX's MLIR context). The fallbacks (the client's `compile_and_load` / `compile`
on the text) are kept for other jaxlib versions and were not exercised. Sharded modules ran on
CPU devices only (the GPU machine had one GPU).
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


def placement(jax, hlo: str, rank: int, devices):
    """The sharding to place an argument (or read a result) with: a GSPMDSharding over `devices`
    in the executable's partition order where this JAX has it (partition i is devices[i], as
    the tile assignment numbers them), else the equivalent NamedSharding."""
    try:
        from jax._src.lib import xla_client as xc
        from jax._src.sharding_impls import GSPMDSharding
        return GSPMDSharding(tuple(devices), xc.HloSharding.from_string(hlo))
    except (ImportError, AttributeError, TypeError):
        return named_sharding(jax, hlo, rank, devices)


def _entry_points(jax, text: str, devices):
    """(name, thunk) for each way of compiling `text` this runner knows, most current first."""
    from jax._src import compiler
    from jax._src.lib import xla_client as xc

    n = len(devices)
    backend = devices[0].client
    options = compiler.get_compile_options(num_replicas=1, num_partitions=n,
                                           device_assignment=np.array(devices, dtype=object).reshape(1, n))
    options.executable_build_options.use_spmd_partitioning = n > 1
    device_list = xc.DeviceList(tuple(devices))

    def parsed():
        from jax._src.interpreters import mlir
        from jax._src.lib.mlir import ir
        with mlir.make_ir_context():
            module = ir.Module.parse(text)
            return compiler.backend_compile_and_load(backend, module, device_list, options, [])

    yield "jax._src.compiler.backend_compile_and_load(ir.Module)", parsed
    yield "client.compile_and_load(text)", lambda: backend.compile_and_load(text, device_list, options)
    yield "client.compile(text)", lambda: backend.compile(text, options)


def compile_module(jax, text: str, devices):
    """Compiles `text` for `devices`; returns (executable, the entry point that worked)."""
    errors = []
    for name, thunk in _entry_points(jax, text, devices):
        try:
            return thunk(), name
        except Exception as e:  # noqa: BLE001 - every entry point's failure is reported
            errors.append(f"{name}: {type(e).__name__}: {e}")
            # A module XLA rejects fails the same way on every entry point: stop at the first
            # error that is not about the entry point itself being absent.
            if not isinstance(e, (AttributeError, TypeError, ImportError)):
                break
    raise RuntimeError("run_stablehlo: XLA did not compile the module:\n  " + "\n  ".join(errors))


def place_inputs(jax, args, feed, devices, seed=0):
    """The module's inputs as jax Arrays laid out as its arguments' shardings say."""
    rng = np.random.default_rng(seed)
    inputs = []
    for k, ((shape, dt), hlo) in enumerate(args):
        dtype = MLIR_DTYPES.get(dt)
        if dtype is None:
            raise ValueError(f"run_stablehlo: argument {k} has element type {dt}, which this runner does not read")
        if feed is not None:
            x = np.asarray(feed[f"arg{k}"])
        elif dtype == "bfloat16" or np.issubdtype(np.dtype(dtype), np.floating):
            x = rng.standard_normal(shape).astype(np.float32)
        else:
            x = np.zeros(shape, dtype=dtype)
        if tuple(x.shape) != shape:
            raise ValueError(f"run_stablehlo: input arg{k} has shape {x.shape}; the module wants {shape}")
        x = np.asarray(jax.numpy.asarray(x, dtype=jax.numpy.bfloat16 if dtype == "bfloat16" else dtype))
        s = placement(jax, hlo, len(shape), devices)
        index = s.devices_indices_map(shape)
        pieces = [jax.device_put(x[index[d]], d) for d in devices]
        inputs.append(jax.make_array_from_single_device_arrays(shape, s, pieces))
    return inputs


def run_module(jax, text: str, feed=None, devices=None, seed=0):
    """Compiles and runs `text`; returns (outputs as numpy arrays, entry point, devices used,
    the loaded executable)."""
    args, results, n = parse_signature(text)
    devices = list(devices if devices is not None else jax.devices())
    if len(devices) < n:
        raise RuntimeError(f"run_stablehlo: the module wants {n} partitions; JAX found {len(devices)} devices "
                           f"({devices[0].platform}). On CPU set XLA_FLAGS=--xla_force_host_platform_device_count={n}.")
    devices = devices[:n]
    exe, how = compile_module(jax, text, devices)
    inputs = place_inputs(jax, args, feed, devices, seed)
    pieces = exe.execute_sharded(inputs).disassemble_into_single_device_arrays()
    outs = []
    for ((shape, _), hlo), per_dev in zip(results, pieces):
        s = placement(jax, hlo, len(shape), devices)
        by_dev = {p.devices().pop() if hasattr(p, "devices") else p.device: p for p in per_dev}
        full = None
        for d, idx in s.devices_indices_map(shape).items():
            piece = np.asarray(by_dev[d])
            if full is None:
                full = np.empty(shape, dtype=piece.dtype)
            full[idx] = piece
        outs.append(full)
    return outs, how, devices, exe


COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")


def collective_counts(hlo_text: str) -> dict:
    """How many of each collective an HLO module's text holds (XLA's `%x = ... all-reduce(`)."""
    return {c: n for c in COLLECTIVES if (n := len(re.findall(r"\b" + c + r"(?:-start)?\(", hlo_text)))}


def compare(outs, want, rtol, atol):
    """[(k, ok, worst |diff| / (atol + rtol |want|), max |diff|)] per output; a row k = -1 when
    the number of outputs differs. With rtol = atol = 0 floats must match bit for bit in sign
    too (-0 is not 0)."""
    rows = []
    n_want = len([name for name in want.files if name.startswith("out")]) if hasattr(want, "files") else len(want)
    if n_want != len(outs):
        rows.append((-1, False, float("inf"), f"{len(outs)} output(s), expected {n_want}"))
    for k, o in enumerate(outs):
        w = np.asarray(want[f"out{k}"])
        g = np.asarray(o)
        if g.shape != w.shape:
            rows.append((k, False, float("inf"), f"shape {g.shape} != {w.shape}"))
            continue
        if g.dtype == np.bool_ or w.dtype == np.bool_ or np.issubdtype(w.dtype, np.integer):
            bad = int(np.sum(g.astype(np.int64) != w.astype(np.int64)))
            rows.append((k, bad == 0, float(bad), f"{bad} differ"))
            continue
        g = g.astype(np.float32)
        w = w.astype(np.float32)
        same = (g == w) | (np.isnan(g) & np.isnan(w))
        if rtol == 0 and atol == 0:
            same &= np.isnan(g) | (np.signbit(g) == np.signbit(w))
        with np.errstate(invalid="ignore"):
            diff = np.where(same, 0.0, np.abs(g - w))
        diff = np.where(np.isnan(diff) | (~same & (diff == 0)), np.inf, diff)  # NaN vs number, -0 vs 0 (exact only)
        scale = atol + rtol * np.where(np.isfinite(w), np.abs(w), 0.0)
        # An exact comparison (scale 0): 0 where equal, inf where not (no 0/0).
        r = np.divide(diff, scale, out=np.where(diff > 0, np.inf, 0.0), where=scale > 0)
        ratio = float(np.max(r)) if diff.size else 0.0
        rows.append((k, bool(ratio <= 1.0), ratio, f"max |diff| {float(np.max(diff)) if diff.size else 0.0:.3g}"))
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("module")
    ap.add_argument("--inputs")
    ap.add_argument("--expect")
    ap.add_argument("--out")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rtol", type=float, default=1e-5)
    ap.add_argument("--atol", type=float, default=1e-5)
    a = ap.parse_args(argv)

    import jax

    text = open(a.module, encoding="utf-8").read()
    feed = np.load(a.inputs) if a.inputs else None
    try:
        outs, how, devices, _ = run_module(jax, text, feed, seed=a.seed)
    except RuntimeError as e:
        print(str(e), file=sys.stderr)
        return 2
    print(f"run_stablehlo: {len(devices)} partition(s) on {[str(d) for d in devices]} via {how}")
    for k, o in enumerate(outs):
        print(f"out{k}: shape {o.shape}\n{o}")
    if a.out:
        np.savez(a.out, **{f"out{k}": o for k, o in enumerate(outs)})
    if a.expect:
        rows = compare(outs, np.load(a.expect), a.rtol, a.atol)
        for k, ok, _, what in rows:
            if not ok:
                print(f"run_stablehlo: {'outputs' if k < 0 else f'out{k}'} differ from {a.expect} ({what})", file=sys.stderr)
        if not all(ok for _, ok, _, _ in rows):
            return 1
        print(f"run_stablehlo: all {len(outs)} output(s) match {a.expect}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
