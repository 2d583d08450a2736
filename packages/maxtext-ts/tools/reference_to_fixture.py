#!/usr/bin/env python3
"""Merges check_maxtext.py --reference files (one per platform of one run) into the fixture
test/jaxReference.test.ts reads:

    python3 reference_to_fixture.py OUT.json REF.json [REF.json ...]

Each REF holds {jax, device, tolerances, cases: {case: {platform: results}}}; the tolerances must
agree (they are check_maxtext.py's TOL).
"""
import json
import sys

if len(sys.argv) < 3:
    sys.exit("usage: reference_to_fixture.py OUT.json REF.json [REF.json ...]")
out, refs = sys.argv[1], [json.load(open(p)) for p in sys.argv[2:]]
fixture = {"runs": [], "tolerances": refs[0]["tolerances"], "cases": {}}
for r in refs:
    assert r["tolerances"] == fixture["tolerances"], "the reference files were made with different tolerances"
    plats = sorted({p for c in r["cases"].values() for p in c})
    fixture["runs"].append({"jax": r["jax"], "device": r["device"], "platform": ",".join(plats)})
    for name, per in r["cases"].items():
        for plat, v in per.items():
            assert plat not in fixture["cases"].get(name, {}), f"{name} [{plat}] given twice"
            fixture["cases"].setdefault(name, {})[plat] = v
with open(out, "w") as f:
    json.dump(fixture, f, separators=(",", ":"))
    f.write("\n")
print(f"{out}: {len(fixture['cases'])} cases, runs {fixture['runs']}")
