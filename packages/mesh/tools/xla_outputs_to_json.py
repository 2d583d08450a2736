#!/usr/bin/env python3
"""Turns the XLA results check_stablehlo_cases.py saved (--save-outputs, one .npz per platform)
into the JSON fixture test/xlaOutputs.test.ts compares tpukit with.

    python3 xla_outputs_to_json.py OUT.json gpu=xla_outputs_gpu.npz cpu=xla_outputs_cpu.npz [--jax 0.11.2]

Only the unoptimised module's results (`<case>.low.out<k>`) are kept (the optimised module gave
the same within the tolerances). Floats are written as shortest round-trip decimals of their
float32 value; NaN and infinities as strings.
"""
import json
import sys

import numpy as np


def enc(x):
    if np.issubdtype(x.dtype, np.floating):
        return [float(v) if np.isfinite(v) else str(v) for v in x.astype(np.float32).reshape(-1).tolist()]
    return [int(v) for v in x.reshape(-1).tolist()]


def main(argv):
    out = {}
    version = "0.11.2"
    if "--jax" in argv:
        i = argv.index("--jax")
        version = argv[i + 1]
        argv = argv[:i] + argv[i + 2:]
    for spec in argv[1:]:
        platform, path = spec.split("=", 1)
        data = np.load(path)
        cases = {}
        for key in sorted(data.files):
            case, kind, k = key.split(".")
            if kind != "low":
                continue
            x = data[key]
            cases.setdefault(case, []).append({"index": int(k[3:]), "dtype": str(x.dtype), "shape": list(x.shape), "values": enc(x)})
        for v in cases.values():
            v.sort(key=lambda o: o["index"])
        out[platform] = cases
    json.dump({"jax": version, "source": "packages/mesh/tools/check_stablehlo_cases.py --save-outputs (FIDELITY.md)", "platforms": out}, open(argv[0], "w"), separators=(",", ":"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
