"""The median and worst |prediction error| of `fuseprof fusion --verify ... --format json` outputs.

Usage: python scripts/verify_errors.py VERIFY.json...

Each file is one trace's verification table (fuseprof/verify/table.py): per chain, the predicted saving
beside the realised one (eager minus torch.compile's replay on the GPU) and error_pct between them. Prints
one line per chain and, over every timed chain, the median and worst |error_pct|, and the chains whose
outputs differ from the float64 replay or that were not replayed.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path


def main(paths: list[str]) -> int:
    errors: list[float] = []
    bad: list[str] = []
    for path in paths:
        rows = json.loads(Path(path).read_text() or "[]")
        for row in rows:
            name = f"{Path(path).stem} chain {row['fusion_row']}"
            verdict = str(row.get("verdict"))
            error = row.get("error_pct")
            realised = row.get("realised_saving_ns")
            print(f"{name:<28} {verdict:<14} trace {row['trace_chain_ns'] / 1e3:8.1f} µs, eager replay "
                  f"{(row.get('eager_ns') or float('nan')) / 1e3:8.1f}; fused predicted "
                  f"{row['predicted_fused_ns'] / 1e3:7.1f}, compiled {(row.get('compiled_ns') or float('nan')) / 1e3:7.1f} "
                  f"({row.get('compiled_kernels')} kernels); saving predicted {row['predicted_saving_ns'] / 1e3:7.1f}, "
                  f"realised {(realised if realised is not None else float('nan')) / 1e3:7.1f}: error "
                  f"{'' if error is None else f'{error:.1f}%'}  {row['signature'][:70]}")
            if not verdict.startswith("outputs agree"):
                bad.append(f"{name}: {verdict}")
            elif error is not None:
                errors.append(abs(float(error)))
    if errors:
        print(f"{len(errors)} timed chains: median |error| {statistics.median(errors):.1f}%, "
              f"worst {max(errors):.1f}%")
    print(f"{len(bad)} chain(s) not agreeing or not replayed" + "".join(f"\n  {b}" for b in bad))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
