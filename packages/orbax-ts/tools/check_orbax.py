#!/usr/bin/env python3
"""Restores orbax-ts checkpoints with the real Orbax and TensorStore, and has Orbax write some.

    python3 check_orbax.py read DIR          DIR from write_checkpoints.ts (expected.json inside)
    python3 check_orbax.py write OUT_DIR     Orbax writes checkpoints (+ expected.json) for orbax-ts
    python3 check_orbax.py read DIR --dry    parse expected.json only (no Orbax needed)

`read` prints one PASS / FAIL / ERROR line per (checkpoint, step, way of reading):
TensorStore opening each array directly (`driver: zarr`), Orbax's CheckpointManager with
`StandardRestore` of an abstract target built from the checkpoint's own metadata (as a user
restores onto their mesh), `StandardCheckpointer` / `PyTreeCheckpointer` on the item directory.
Every leaf is compared bit for bit with expected.json.
"""
from __future__ import annotations

import json
import os
import sys
import traceback

import numpy as np


def decode(leaf):
    """expected.json's leaf -> numpy array (exact bits) or a Python value."""
    if "value" in leaf:
        return leaf["value"]
    dt, shape, vals = leaf["dtype"], leaf["shape"], leaf["values"]
    if dt == "float32":
        return np.array([int(v, 16) for v in vals], np.uint32).view(np.float32).reshape(shape)
    if dt == "bfloat16":
        import ml_dtypes
        return np.array([int(v, 16) for v in vals], np.uint16).view(ml_dtypes.bfloat16).reshape(shape)
    return np.array(vals, {"int32": np.int32, "uint32": np.uint32, "int8": np.int8, "uint8": np.uint8, "bool": np.bool_}[dt]).reshape(shape)


def same(got, want) -> str | None:
    """None when `got` equals `want` exactly (arrays: dtype, shape and bits), else what differs."""
    if isinstance(want, np.ndarray):
        g = np.asarray(got)
        if g.shape != want.shape:
            return f"shape {g.shape} != {want.shape}"
        if str(g.dtype) != str(want.dtype):
            return f"dtype {g.dtype} != {want.dtype}"
        if g.tobytes() != want.tobytes():
            bad = int(np.sum(g.reshape(-1).view(np.uint8).reshape(g.size, -1) != want.reshape(-1).view(np.uint8).reshape(want.size, -1)) > 0) if g.size else 0
            return f"values differ ({bad} byte rows)"
        return None
    g = got.item() if hasattr(got, "item") and np.ndim(got) == 0 else got
    return None if g == want and type(g) is type(want) else f"{g!r} ({type(g).__name__}) != {want!r} ({type(want).__name__})"


def flat_paths(tree, prefix=()):
    """{'a.b.0': leaf} for a restored pytree (dicts and lists)."""
    out = {}
    if isinstance(tree, dict):
        for k, v in tree.items():
            out.update(flat_paths(v, prefix + (str(k),)))
    elif isinstance(tree, (list, tuple)):
        for i, v in enumerate(tree):
            out.update(flat_paths(v, prefix + (str(i),)))
    else:
        out[".".join(prefix)] = tree
    return out


def replicated_everywhere(restored) -> list[str]:
    """Problems unless every jax.Array in `restored` is fully replicated over all of jax.devices()."""
    import jax
    problems = []
    for path, x in flat_paths(restored).items():
        if isinstance(x, jax.Array) and (not x.sharding.is_fully_replicated or set(x.sharding.device_set) != set(jax.devices())):
            problems.append(f"{path}: sharding {x.sharding} is not replicated over {jax.devices()}")
    return problems


def compare_tree(restored, expected) -> list[str]:
    got = flat_paths(restored)
    problems = []
    for path, leaf in expected.items():
        if path not in got:
            problems.append(f"{path}: missing")
            continue
        d = same(got[path], decode(leaf))
        if d:
            problems.append(f"{path}: {d}")
    for path in got:
        if path not in expected:
            problems.append(f"{path}: unexpected")
    return problems


def report(rows, tag, fn):
    try:
        problems = fn()
    except Exception as e:  # noqa: BLE001 - each way of reading is reported on its own
        msg = f"{type(e).__name__}: {e}"
        print(f"ERROR {tag}: {msg[:1500]}")
        traceback.print_exc(limit=3, file=sys.stdout)
        rows.append({"check": tag, "status": "ERROR", "detail": msg[:3000]})
        return
    status = "PASS" if not problems else "FAIL"
    print(f"{status} {tag}" + ("" if not problems else ": " + "; ".join(problems[:8])))
    rows.append({"check": tag, "status": status, "detail": problems[:20]})


def unflatten(expected, make):
    """A nested dict / list tree from expected.json paths, leaves made by `make(leaf)`."""
    root: dict = {}
    for path, leaf in expected.items():
        keys = path.split(".")
        node = root
        for k in keys[:-1]:
            node = node.setdefault(k, {})
        node[keys[-1]] = make(leaf)

    def fix(n):
        if isinstance(n, dict):
            n = {k: fix(v) for k, v in n.items()}
            if n and all(k.isdigit() for k in n) and sorted(int(k) for k in n) == list(range(len(n))):
                return [n[str(i)] for i in range(len(n))]
        return n
    return fix(root)


def mixed_tree(jnp):
    """The tree of non-array leaves and containers both sides write (write_checkpoints.ts' mixedTree)."""
    return {
        "flags": {"on": True, "off": False},
        "name": "tiny-gpt",
        "layers": [jnp.arange(3, dtype=jnp.float32), {"k": jnp.ones((2, 2), jnp.int32), "tag": "l1"}],
        "pair": (jnp.asarray(np.float32(2.5)), 4),
        "none": None,
        "empty_d": {},
        "empty_l": [],
        "n": -3,
        "x": 1e-3,
    }


def describe(x, tuples_as_lists=False):
    """A tree as type-tagged JSON: {"dict": ...}, {"list": ...}, {"array": {dtype, shape, values}}, {"bool": true}, ..."""
    import jax
    if isinstance(x, dict):
        return {"dict": {k: describe(v, tuples_as_lists) for k, v in x.items()}}
    if isinstance(x, (list, tuple)):
        tag = "list" if isinstance(x, list) or tuples_as_lists else "tuple"
        return {tag: [describe(v, tuples_as_lists) for v in x]}
    if x is None:
        return {"none": None}
    if isinstance(x, (np.ndarray, jax.Array)):
        a = np.asarray(x)
        return {"array": {"dtype": str(a.dtype), "shape": list(a.shape), "values": a.reshape(-1).tolist()}}
    return {type(x).__name__: x}


def read_mixed(d: str) -> list:
    """Orbax restores orbax-ts's mixed tree (bools, strings, lists, a tuple, None, empty containers)
    with no target exactly as it restores the same tree it saved itself (tuples come back as lists)."""
    import jax.numpy as jnp
    import orbax.checkpoint as ocp
    rows: list = []
    want = describe(mixed_tree(jnp), tuples_as_lists=True)
    root = os.path.join(d, "mixed")

    def check(got):
        return [] if describe(got) == want else [f"restored {json.dumps(describe(got))[:400]}, expected {json.dumps(want)[:400]}"]
    report(rows, "mixed tree: PyTreeCheckpointer().restore(item dir), no target", lambda: check(ocp.PyTreeCheckpointer().restore(os.path.join(root, "3", "state"))))
    report(rows, "mixed tree: StandardCheckpointer().restore(item dir), no target", lambda: check(ocp.StandardCheckpointer().restore(os.path.join(root, "3", "state"))))

    def via_manager():
        with ocp.CheckpointManager(root) as m:
            return check(m.restore(3)["state"])
    report(rows, "mixed tree: CheckpointManager(dir).restore(3), no args", via_manager)
    return rows


def read(d: str, dry: bool) -> list:
    expected = json.load(open(os.path.join(d, "expected.json")))
    if dry:
        for name, steps in expected.items():
            for step, items in steps.items():
                for item, leaves in items.items():
                    n = sum(1 for _ in leaves) if isinstance(leaves, dict) and "value" not in leaves else 1
                    print(f"DRY {name}/{step}/{item}: {n} leaves")
        return []
    import jax
    import orbax.checkpoint as ocp
    import tensorstore as ts

    dev = jax.devices()[0]
    single = jax.sharding.SingleDeviceSharding(dev)
    rows: list = []

    def abstract(leaf):
        if "value" in leaf:
            return leaf["value"]
        return jax.ShapeDtypeStruct(tuple(leaf["shape"]), jax.numpy.dtype(leaf["dtype"]), sharding=single)

    for name, steps in expected.items():
        root = os.path.join(d, name)
        for step, items in steps.items():
            sdir = os.path.join(root, step)
            for item, leaves in items.items():
                if "value" in leaves:
                    continue
                for path, leaf in leaves.items():
                    if "value" in leaf and not isinstance(leaf["value"], (int, float, bool)):
                        continue

                def via_ts(item=item, leaves=leaves):
                    problems = []
                    for path, leaf in leaves.items():
                        if "value" in leaf and not isinstance(leaf["value"], (int, float, bool)):
                            continue
                        arr = ts.open({"driver": "zarr", "kvstore": {"driver": "file", "path": os.path.join(sdir, item, path)}}, open=True).result()
                        got = arr.read().result()
                        if "value" in leaf:
                            got = got.item()
                        d_ = same(got, decode(leaf))
                        if d_:
                            problems.append(f"{path}: {d_}")
                    return problems
                report(rows, f"tensorstore {name}/{step}/{item} ({len(leaves)} leaves)", via_ts)

                def via_standard(item=item, leaves=leaves):
                    with ocp.StandardCheckpointer() as ckptr:
                        restored = ckptr.restore(os.path.join(sdir, item), unflatten(leaves, abstract))
                    return compare_tree(restored, leaves)
                report(rows, f"orbax StandardCheckpointer.restore(target) {name}/{step}/{item}", via_standard)

                def via_pytree(item=item, leaves=leaves):
                    target = unflatten(leaves, abstract)
                    restore_args = ocp.checkpoint_utils.construct_restore_args(target)
                    restored = ocp.PyTreeCheckpointer().restore(os.path.join(sdir, item), args=ocp.args.PyTreeRestore(item=target, restore_args=restore_args))
                    return compare_tree(restored, leaves)
                report(rows, f"orbax PyTreeCheckpointer.restore(PyTreeRestore(target, restore_args)) {name}/{step}/{item}", via_pytree)

                def via_standard_no_target(item=item, leaves=leaves):
                    # orbax-ts's `_sharding` names no device: every array comes back replicated
                    # over all of jax.devices(), whatever they are.
                    restored = ocp.StandardCheckpointer().restore(os.path.join(sdir, item))
                    return compare_tree(restored, leaves) + replicated_everywhere(restored)
                report(rows, f"orbax StandardCheckpointer.restore() without a target {name}/{step}/{item}", via_standard_no_target)

                def via_no_target(item=item, leaves=leaves):
                    restored = ocp.PyTreeCheckpointer().restore(os.path.join(sdir, item))
                    return compare_tree(restored, leaves) + replicated_everywhere(restored)
                report(rows, f"orbax PyTreeCheckpointer.restore() without a target {name}/{step}/{item}", via_no_target)

        def via_manager_no_args(root=root, steps=steps):
            # CheckpointManager.restore(step) with no args: the handlers come from the step's
            # _CHECKPOINT_METADATA, the shardings from each item's `_sharding`.
            problems = []
            with ocp.CheckpointManager(root) as mgr:
                for step, items in steps.items():
                    restored = mgr.restore(int(step))
                    for item, leaves in items.items():
                        # A step saved as one unnamed item restores as that item itself.
                        got = restored if list(items) == ["default"] else restored[item]
                        if "value" in leaves:
                            if got != leaves["value"]:
                                problems.append(f"{step}/{item}: {got!r} != {leaves['value']!r}")
                        else:
                            problems += [f"{step}/{item}/{p}" for p in compare_tree(got, leaves) + replicated_everywhere(got)]
            return problems
        report(rows, f"orbax CheckpointManager.restore(step) without args {name} steps {sorted(steps)}", via_manager_no_args)

        def via_manager(root=root, steps=steps):
            problems = []
            with ocp.CheckpointManager(root) as mgr:
                got_steps = sorted(mgr.all_steps())
                if got_steps != sorted(int(s) for s in steps):
                    problems.append(f"all_steps {got_steps} != {sorted(int(s) for s in steps)}")
                for step, items in steps.items():
                    restore_args = {}
                    for item, leaves in items.items():
                        if "value" in leaves:
                            restore_args[item] = ocp.args.JsonRestore()
                        else:
                            restore_args[item] = ocp.args.StandardRestore(unflatten(leaves, abstract))
                    if list(items) == ["default"]:
                        restored = {"default": mgr.restore(int(step), args=restore_args["default"])}
                    else:
                        restored = mgr.restore(int(step), args=ocp.args.Composite(**restore_args))
                    for item, leaves in items.items():
                        if "value" in leaves:
                            if restored[item] != leaves["value"]:
                                problems.append(f"{step}/{item}: {restored[item]!r} != {leaves['value']!r}")
                        else:
                            problems += [f"{step}/{item}/{p}" for p in compare_tree(restored[item], leaves)]
            return problems
        report(rows, f"orbax CheckpointManager.restore(StandardRestore(target)) {name} steps {sorted(steps)}", via_manager)
    return rows


def read_safetensors(d: str) -> list:
    """The Python `safetensors` package loads model.safetensors (saveSafetensors): every tensor bit for bit."""
    rows: list = []
    expected = json.load(open(os.path.join(d, "expected_safetensors.json")))
    file = os.path.join(d, "model.safetensors")

    def via_numpy():
        from safetensors import safe_open
        problems = []
        with safe_open(file, framework="np") as f:
            if f.metadata() != {"format": "pt", "source": "tpukit"}:
                problems.append(f"metadata {f.metadata()}")
            names = set(f.keys())
            for name, leaf in expected.items():
                if name not in names:
                    problems.append(f"{name}: missing")
                    continue
                want = decode(leaf)
                try:
                    got = f.get_tensor(name)
                except Exception as e:  # noqa: BLE001 - numpy has no bfloat16 in some versions
                    problems.append(f"{name}: numpy could not load it ({type(e).__name__}: {e})")
                    continue
                d_ = same(got, want)
                if d_:
                    problems.append(f"{name}: {d_}")
            problems += [f"{n}: unexpected" for n in names - set(expected)]
        return problems
    report(rows, "safetensors.safe_open(framework='np') reads saveSafetensors output", via_numpy)

    def via_torch():
        import torch
        from safetensors.torch import load_file
        got = load_file(file)
        problems = []
        for name, leaf in expected.items():
            t = got[name]
            want = decode(leaf)
            if t.dtype == torch.bfloat16:
                g = t.view(torch.int16).numpy().view(np.uint16)
                w = want.view(np.uint16)
            else:
                g, w = t.numpy(), want
            d_ = same(g, w)
            if d_:
                problems.append(f"{name}: {d_}")
        return problems
    report(rows, "safetensors.torch.load_file reads saveSafetensors output", via_torch)
    return rows


def write(out: str) -> list:
    """Orbax writes: its default layout (OCDBT), and use_ocdbt=False with Zarr v2 and v3; and a tree of
    non-array leaves and containers in the plain layout, with what Orbax restores from it."""
    import jax
    import jax.numpy as jnp
    import ml_dtypes
    import orbax.checkpoint as ocp

    os.makedirs(out, exist_ok=True)
    tree = {
        "params": {"w": np.arange(15, dtype=np.float32).reshape(5, 3) / 7 - 1,
                   "b": np.array([1.5, -0.0, 3e38], np.float32),
                   "e": (np.arange(8, dtype=np.float32) / 3).astype(ml_dtypes.bfloat16).reshape(2, 4)},
        "ids": np.array([-2147483648, 0, 7, 2147483647], np.int32),
        "count": np.array(12, np.int32),
        "step": 7,
        "lr": 0.25,
    }
    jtree = jax.tree_util.tree_map(lambda x: jnp.asarray(x) if isinstance(x, np.ndarray) else x, tree)

    def enc(x):
        if isinstance(x, np.ndarray):
            dt = str(x.dtype)
            if dt == "float32":
                vals = [f"{v:08x}" for v in x.reshape(-1).view(np.uint32).tolist()]
            elif dt == "bfloat16":
                vals = [f"{v:04x}" for v in x.reshape(-1).view(np.uint16).tolist()]
            else:
                vals = [int(v) for v in x.reshape(-1).tolist()]
            return {"dtype": dt, "shape": list(x.shape), "values": vals}
        return {"value": x}
    leaves = {".".join(str(getattr(k, "key", getattr(k, "idx", k))) for k in p): enc(v)
              for p, v in jax.tree_util.tree_flatten_with_path(tree)[0]}
    variants = {
        "ocdbt_default": {},
        "zarr2": {"use_ocdbt": False, "use_zarr3": False},
        "zarr2_raw": {"use_ocdbt": False, "use_zarr3": False, "use_compression": False},
        "zarr3": {"use_ocdbt": False, "use_zarr3": True},
    }
    rows = []
    expected = {}
    for name, kw in variants.items():
        def go(name=name, kw=kw):
            d = os.path.join(out, name)
            handler = ocp.PyTreeCheckpointHandler(**kw) if kw else ocp.PyTreeCheckpointHandler()
            with ocp.CheckpointManager(d, item_handlers={"state": handler}) as mgr:
                mgr.save(3, args=ocp.args.Composite(state=ocp.args.PyTreeSave(jtree)))
                mgr.wait_until_finished()
            files = sorted(os.path.relpath(os.path.join(r, f), d) for r, _, fs in os.walk(d) for f in fs)
            print(f"  {name}: {len(files)} files: {files[:40]}")
            expected[name] = {"3": {"state": leaves}}
            return []
        report(rows, f"orbax writes {name} {kw}", go)
    json.dump(expected, open(os.path.join(out, "expected.json"), "w"))

    def mixed():
        # The plain layout orbax-ts reads, and what Orbax itself restores from it with no target.
        d = os.path.join(out, "mixed_raw")
        kw = {"use_ocdbt": False, "use_zarr3": False, "use_compression": False}
        with ocp.CheckpointManager(d, item_handlers={"state": ocp.PyTreeCheckpointHandler(**kw)}) as mgr:
            mgr.save(3, args=ocp.args.Composite(state=ocp.args.PyTreeSave(mixed_tree(jnp))))
            mgr.wait_until_finished()
        with ocp.CheckpointManager(d, item_handlers={"state": ocp.PyTreeCheckpointHandler(**kw)}) as mgr:
            got = mgr.restore(3, args=ocp.args.Composite(state=ocp.args.PyTreeRestore()))["state"]
        json.dump(describe(got), open(os.path.join(out, "mixed_restored.json"), "w"), indent=1)
        return []
    report(rows, "orbax writes mixed_raw (bools, strings, lists, a tuple, None, empty containers)", mixed)
    return rows


def main(argv):
    dry = "--dry" in argv
    args = [a for a in argv if not a.startswith("--")]
    out_json = None
    if "--json" in argv:
        out_json = argv[argv.index("--json") + 1]
        args = [a for a in args if a != out_json]
    mode, d = args[0], args[1]
    if mode == "read":
        rows = read(d, dry)
        if not dry and os.path.exists(os.path.join(d, "model.safetensors")):
            rows += read_safetensors(d)
        if not dry and os.path.isdir(os.path.join(d, "mixed")):
            rows += read_mixed(d)
    else:
        rows = write(d)
    if out_json:
        json.dump(rows, open(out_json, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
