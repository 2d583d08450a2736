#!/usr/bin/env python3
"""One run of every fidelity check against the real JAX / XLA / Orbax / TensorStore, on a
machine that has them (FIDELITY.md at the repo root records the runs). Prepared by
prepare_devcheck.sh, which copies the tools and the tpukit-made artifacts next to this file:

    tools/   jax_random_fixture.py run_stablehlo.py check_stablehlo_cases.py check_orbax.py check_maxtext.py
    shlo/    export_stablehlo_cases.ts output (modules, npz, cases.json)
    shlo_wrappers/  the same with --wrappers (nested jit, remat, custom derivatives, top_k)
    ock/     write_checkpoints.ts output (orbax-ts checkpoints, expected.json, model.safetensors)
    mt/      maxtext-ts's write_fidelity_cases.ts output (checkpoints, tpukit's results, case.json)

    OUT=dir python3 check.py [--dry]

Each step runs in its own subprocess with its own timeout (CPU steps with JAX_PLATFORMS=cpu and
8 forced host devices), prints PASS / FAIL / ERROR lines, and one failure never stops the
others. Results land in $OUT: log lines on stdout, jax_random_{gpu,cpu}.json, results.json,
xla_outputs_{gpu,cpu}.npz (XLA's results per module), orbax_written.tgz,
jax_maxtext_{gpu,cpu}.json (JAX's maxtext-ts results, the form test/jaxReference.test.ts replays).
Steps can be picked: `--only 4` runs the steps whose number starts with 4.
"""
from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = os.path.join(HERE, "tools")
OUT = os.environ.get("OUT") or os.path.join(HERE, "out")
CPU_ENV = {"JAX_PLATFORMS": "cpu", "XLA_FLAGS": "--xla_force_host_platform_device_count=8"}
ONLY = ""  # --only PREFIX: run the steps whose name starts with it


def step(name: str, args: list[str], timeout: int, env: dict | None = None) -> int:
    if not name.startswith(ONLY):
        return 0
    print(f"\n===== {name} =====", flush=True)
    t0 = time.time()
    e = dict(os.environ)
    e.update(env or {})
    try:
        r = subprocess.run([sys.executable, *args], cwd=TOOLS, env=e, timeout=timeout, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        lines = [ln for ln in r.stdout.splitlines() if not ln.startswith(("W1", "I1", "E0000"))]
        print("\n".join(lines[-400:]), flush=True)
        print(f"----- {name}: exit {r.returncode} in {time.time() - t0:.1f}s", flush=True)
        return r.returncode
    except subprocess.TimeoutExpired as ex:
        out = ex.stdout.decode() if isinstance(ex.stdout, bytes) else (ex.stdout or "")
        print(out[-6000:])
        print(f"ERROR {name}: timed out after {timeout}s", flush=True)
        return 124


def versions() -> None:
    print(f"python {platform.python_version()} on {platform.platform()}")
    for mod in ("jax", "jaxlib", "orbax.checkpoint", "tensorstore", "numpy", "ml_dtypes", "safetensors", "torch"):
        try:
            m = __import__(mod, fromlist=["_"])
            v = getattr(m, "__version__", None)
            if v is None:
                from importlib.metadata import version
                v = version({"orbax.checkpoint": "orbax-checkpoint"}.get(mod, mod))
            print(f"{mod} {v}")
        except Exception as e:  # noqa: BLE001
            print(f"{mod}: not importable ({type(e).__name__}: {e})")
    try:
        import jax
        print(f"jax.devices() {jax.devices()}")
        print(f"jax_threefry_partitionable {jax.config.jax_threefry_partitionable}")
    except Exception as e:  # noqa: BLE001
        print(f"jax.devices(): {type(e).__name__}: {e}")
    print(f"which node: {shutil.which('node')}")
    sys.stdout.flush()


S1A = "1a. jax.random fixture on the default platform (GPU)"
S1B = "1b. jax.random fixture on CPU"
S3B = "3b. Orbax writes checkpoints for orbax-ts"


class _Skipped(Exception):
    """A block after a step that --only left out (the step's outputs are not there)."""


def main(argv) -> int:
    dry = "--dry" in argv
    os.makedirs(OUT, exist_ok=True)
    print(f"fidelity devcheck {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}; OUT={OUT}")
    if dry:
        step("random fixture specs (dry)", ["jax_random_fixture.py", "--dry"], 60)
        step("stablehlo cases (dry)", ["check_stablehlo_cases.py", os.path.join(HERE, "shlo"), "--dry"], 60)
        if os.path.isdir(os.path.join(HERE, "shlo_wrappers")):
            step("stablehlo wrapper cases (dry)", ["check_stablehlo_cases.py", os.path.join(HERE, "shlo_wrappers"), "--dry"], 60)
        step("orbax-ts checkpoints (dry)", ["check_orbax.py", "read", os.path.join(HERE, "ock"), "--dry"], 60)
        if os.path.isdir(os.path.join(HERE, "mt")):
            step("maxtext-ts cases (dry)", ["check_maxtext.py", os.path.join(HERE, "mt"), "--dry"], 60)
        return 0
    versions()
    global ONLY
    ONLY = argv[argv.index("--only") + 1] if "--only" in argv else ""
    t0 = time.time()
    step(S1A, ["jax_random_fixture.py", os.path.join(OUT, "jax_random_gpu.json")], 120)
    step(S1B, ["jax_random_fixture.py", os.path.join(OUT, "jax_random_cpu.json")], 120, CPU_ENV)
    try:
        if not (S1A.startswith(ONLY) and S1B.startswith(ONLY)):
            raise _Skipped
        g = json.load(open(os.path.join(OUT, "jax_random_gpu.json")))["cases"]
        c = json.load(open(os.path.join(OUT, "jax_random_cpu.json")))["cases"]
        diff = [json.dumps({k: v for k, v in a.items() if k != "out"}) for a, b in zip(g, c) if a.get("out") != b.get("out")]
        print(f"{'PASS' if not diff else 'INFO'} jax.random GPU vs CPU: {len(g) - len(diff)}/{len(g)} cases identical; differ: {diff[:20]}")
    except _Skipped:
        pass
    except Exception as e:  # noqa: BLE001
        print(f"ERROR comparing GPU and CPU random fixtures: {e}")
    shlo = os.path.join(HERE, "shlo")
    step("2a. StableHLO modules on GPU", ["check_stablehlo_cases.py", shlo, "--json", os.path.join(OUT, "stablehlo_gpu.json"), "--save-outputs", os.path.join(OUT, "xla_outputs_gpu.npz")], 240)
    step("2b. StableHLO modules on CPU (8 host devices)", ["check_stablehlo_cases.py", shlo, "--json", os.path.join(OUT, "stablehlo_cpu.json"), "--save-outputs", os.path.join(OUT, "xla_outputs_cpu.npz")], 240, CPU_ENV)
    wrap = os.path.join(HERE, "shlo_wrappers")
    if os.path.isdir(wrap):
        step("2c. StableHLO call wrappers and top_k on GPU", ["check_stablehlo_cases.py", wrap, "--json", os.path.join(OUT, "stablehlo_wrappers_gpu.json"), "--save-outputs", os.path.join(OUT, "xla_wrappers_gpu.npz")], 120)
        step("2d. StableHLO call wrappers and top_k on CPU", ["check_stablehlo_cases.py", wrap, "--json", os.path.join(OUT, "stablehlo_wrappers_cpu.json"), "--save-outputs", os.path.join(OUT, "xla_wrappers_cpu.npz")], 120, CPU_ENV)
    ock = os.path.join(HERE, "ock")
    step("3a. Orbax / TensorStore / safetensors read orbax-ts files", ["check_orbax.py", "read", ock, "--json", os.path.join(OUT, "orbax_read.json")], 180)
    written = os.path.join(HERE, "orbax_written")
    step(S3B, ["check_orbax.py", "write", written, "--json", os.path.join(OUT, "orbax_write.json")], 120, {"JAX_PLATFORMS": "cpu"})
    try:
        if not S3B.startswith(ONLY):
            raise _Skipped
        with tarfile.open(os.path.join(OUT, "orbax_written.tgz"), "w:gz") as t:
            t.add(written, arcname="orbax_written")
        print(f"orbax_written.tgz: {os.path.getsize(os.path.join(OUT, 'orbax_written.tgz'))} bytes")
    except _Skipped:
        pass
    except Exception as e:  # noqa: BLE001
        print(f"ERROR tar of Orbax-written checkpoints: {e}")
    mt = os.path.join(HERE, "mt")
    if os.path.isdir(mt):
        step("4a. maxtext-ts against JAX on the default platform (GPU)", ["check_maxtext.py", mt, "--json", os.path.join(OUT, "maxtext_gpu.json"), "--reference", os.path.join(OUT, "jax_maxtext_gpu.json")], 300)
        step("4b. maxtext-ts against JAX on CPU", ["check_maxtext.py", mt, "--json", os.path.join(OUT, "maxtext_cpu.json"), "--reference", os.path.join(OUT, "jax_maxtext_cpu.json")], 300, {"JAX_PLATFORMS": "cpu"})
    results = {}
    for name in ("stablehlo_gpu", "stablehlo_cpu", "stablehlo_wrappers_gpu", "stablehlo_wrappers_cpu", "orbax_read", "orbax_write", "maxtext_gpu", "maxtext_cpu"):
        p = os.path.join(OUT, f"{name}.json")
        if os.path.exists(p):
            results[name] = json.load(open(p))
            os.remove(p)
    json.dump(results, open(os.path.join(OUT, "results.json"), "w"), indent=1)
    print(f"\nall steps done in {time.time() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
