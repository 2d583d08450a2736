#!/usr/bin/env python3
"""Compiles and runs every module export_stablehlo_cases.ts wrote, with real XLA, and compares
the results with tpukit's.

    python3 check_stablehlo_cases.py DIR [--json results.json] [--save-outputs xla.npz] [--dry]

Runs on the platform JAX picks (JAX_PLATFORMS=cpu for CPU; for the sharded cases on CPU set
XLA_FLAGS=--xla_force_host_platform_device_count=8). A case whose partition count exceeds the
devices found is reported as SKIP. Prints one PASS / FAIL / ERROR line per (case, module).
`--dry` only reads the case list and module signatures (no JAX needed).
"""
from __future__ import annotations

import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_stablehlo as rs  # noqa: E402


def main(argv):
    dry = "--dry" in argv
    rest = [a for a in argv if a != "--dry"]
    out_json = None
    if "--json" in rest:
        i = rest.index("--json")
        out_json = rest[i + 1]
        del rest[i:i + 2]
    out_npz = None
    if "--save-outputs" in rest:
        i = rest.index("--save-outputs")
        out_npz = rest[i + 1]
        del rest[i:i + 2]
    d = rest[0]
    cases = json.load(open(os.path.join(d, "cases.json")))
    if dry:
        for c in cases:
            for kind in c["modules"]:
                text = open(os.path.join(d, f"{c['name']}.{kind}.mlir")).read()
                args, results, n = rs.parse_signature(text)
                print(f"DRY {c['name']}.{kind}: {len(args)} args, {len(results)} results, {n} partition(s)")
        return 0
    import jax

    devices = jax.devices()
    platform = devices[0].platform
    print(f"stablehlo cases on {platform}: {len(devices)} device(s), jax {jax.__version__}")
    rows = []
    saved: dict = {}
    for c in cases:
        tol = c["gpuTol"] if platform == "gpu" else c["tol"]
        feed = np.load(os.path.join(d, f"{c['name']}.npz"))
        for kind in ("low", "opt"):
            tag = f"{c['name']}.{kind}"
            if kind not in c["modules"] and c.get(f"{kind}Skipped"):
                print(f"SKIP {tag}: {c[f'{kind}Skipped']}")
                rows.append({"case": tag, "status": "SKIP", "detail": c[f"{kind}Skipped"]})
                continue
            if kind not in c["modules"]:
                why = c.get(f"{kind}Error", "not exported")
                print(f"ERROR {tag}: tpukit did not export it: {why}")
                rows.append({"case": tag, "status": "ERROR", "detail": f"export: {why}"})
                continue
            if c["partitions"] > len(devices):
                print(f"SKIP {tag}: needs {c['partitions']} devices, {platform} has {len(devices)}")
                rows.append({"case": tag, "status": "SKIP"})
                continue
            text = open(os.path.join(d, f"{tag}.mlir")).read()
            t0 = time.time()
            try:
                outs, how, _, exe = rs.run_module(jax, text, feed)
            except Exception as e:  # noqa: BLE001 - reported, the next case runs
                msg = f"{type(e).__name__}: {e}"
                print(f"ERROR {tag}: {msg[:1500]}")
                rows.append({"case": tag, "status": "ERROR", "detail": msg[:4000]})
                continue
            cmp = rs.compare(outs, feed, tol["rtol"], tol["atol"])
            ok = all(r[1] for r in cmp)
            worst = max((r[2] for r in cmp), default=0.0)
            detail = "; ".join(f"out{k} {what} ({'ok' if good else 'BAD'}, ratio {ratio:.3g})" for k, good, ratio, what in cmp)
            status = "PASS" if ok else "FAIL"
            print(f"{status} {tag}: {len(outs)} output(s), worst ratio {worst:.3g} (rtol {tol['rtol']}, atol {tol['atol']}), "
                  f"{time.time() - t0:.2f}s via {how}; {detail}")
            row = {"case": tag, "status": status, "worst": worst, "via": how, "detail": detail}
            for k, o in enumerate(outs):
                saved[f"{tag}.out{k}"] = np.asarray(o).astype(np.float32) if str(np.asarray(o).dtype) == "bfloat16" else np.asarray(o)
            if c["partitions"] > 1:
                # GSPMD: the collectives XLA's partitioner chose, next to the ones tpukit's did.
                try:
                    xla_hlo = "\n".join(m.to_string() for m in exe.hlo_modules())
                except Exception as e:  # noqa: BLE001
                    xla_hlo = f"(no HLO text: {e})"
                row["xla_collectives"] = rs.collective_counts(xla_hlo)
                row["tpukit_collectives"] = c.get("tpukitCollectives")
                print(f"INFO {tag}: collectives XLA {row['xla_collectives']} / tpukit {row['tpukit_collectives']}")
            rows.append(row)
    if out_npz:
        np.savez_compressed(out_npz, **saved)
    if out_json:
        json.dump({"platform": platform, "jax": jax.__version__, "devices": len(devices), "rows": rows}, open(out_json, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
