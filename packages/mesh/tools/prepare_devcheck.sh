#!/usr/bin/env bash
# Builds the folder fidelity_devcheck.py runs from on a machine with JAX/Orbax (FIDELITY.md):
# the Python tools and the artifacts tpukit makes (StableHLO modules with their inputs and
# outputs, orbax-ts checkpoints, a safetensors file, maxtext-ts's fidelity cases). Run from the repository root after
# `pnpm build`:   bash packages/mesh/tools/prepare_devcheck.sh DEST
set -euo pipefail
dest=${1:?usage: prepare_devcheck.sh DEST}
root=$(cd "$(dirname "$0")/../../.." && pwd)
rm -rf "$dest"
mkdir -p "$dest/tools"
cp "$root/packages/mesh/tools/fidelity_devcheck.py" "$dest/check.py"
cp "$root/packages/core/tools/jax_random_fixture.py" "$root/packages/mesh/tools/run_stablehlo.py" \
  "$root/packages/mesh/tools/check_stablehlo_cases.py" "$root/packages/orbax-ts/tools/check_orbax.py" \
  "$root/packages/maxtext-ts/tools/check_maxtext.py" "$dest/tools/"
cd "$root"
npx tsx packages/mesh/tools/export_stablehlo_cases.ts "$dest/shlo"
npx tsx packages/mesh/tools/export_stablehlo_cases.ts "$dest/shlo_wrappers" --wrappers
npx tsx packages/orbax-ts/tools/write_checkpoints.ts "$dest/ock"
npx tsx packages/maxtext-ts/tools/write_fidelity_cases.ts "$dest/mt"
du -sh "$dest"
