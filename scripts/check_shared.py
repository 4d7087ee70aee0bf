"""Run ``fuseprof check`` over every shared trace and write the table of docs/validation.md's "A trace's
completeness": per trace, the exit status, the damage that fails it (with the share of GPU time in doubt), the
notes (capture settings, edges, damage under 1%), and what torch's own validator (torch 2.13,
``torch.profiler._trace_validator``, where torch is installed) flags on the same file.

    python scripts/check_shared.py [--write]      # --write: replace the table in docs/validation.md

The traces are ``tests/shared_traces.txt``'s, under ``../shared/thirdparty-traces``. Each runs as its own
``python -m fuseprof.cli check TRACE --format json`` (the exit status a CI script sees).
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "thirdparty-traces"
DOC = ROOT / "docs" / "validation.md"
BEGIN, END = "<!-- check_shared.py: begin -->", "<!-- check_shared.py: end -->"


def _torch_says(path: Path) -> str:
    """The rules torch's validator flags on the file, with counts ('' for none; '?' without torch)."""
    try:
        from torch.profiler._trace_validator import validate_trace
    except ImportError:
        return "?"
    _, violations = validate_trace(str(path))
    counts = collections.Counter(v.rule_name.removeprefix("_check_") for v in violations)
    return ", ".join(f"{rule} ×{n}" for rule, n in sorted(counts.items()))


def check(name: str) -> tuple[int, list[str], list[str]]:
    """``fuseprof check``'s exit status on one shared trace, its failed damage and its notes (kind, check, share)."""
    done = subprocess.run([sys.executable, "-m", "fuseprof.cli", "check", str(SHARED / name), "--format", "json"],
                          capture_output=True, text=True, cwd=ROOT, check=False)
    if done.returncode == 2:
        return 2, [done.stderr.strip().splitlines()[-1].replace(f"{SHARED}/", "")[:160]], []
    rows = [r for r in json.loads(done.stdout) if not r["ok"]]
    failing = {line.split(": ", 1)[-1].split(" (")[0] for line in done.stderr.split("failed: ", 1)[-1].split("; ")} \
        if done.returncode == 1 else set()

    def said(r: dict) -> str:
        share = r["doubt_pct"]
        return f"{r['check']} ({r['kind']}{'' if share is None else f', {share:.3g}%'})"
    return (done.returncode, [said(r) for r in rows if r["check"] in failing],
            [said(r) for r in rows if r["check"] not in failing])


def table() -> str:
    lines = ["| trace | exit | damage that fails it (% of GPU time in doubt) | notes | torch's validator |",
             "|---|---|---|---|---|"]
    for name in (ROOT / "tests" / "shared_traces.txt").read_text().split():
        code, failed, notes = check(name)
        lines.append(f"| {name} | {code} | {'; '.join(failed)} | {'; '.join(notes)} | {_torch_says(SHARED / name)} |")
        print(lines[-1], flush=True)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true", help=f"replace the table between the markers in {DOC}")
    args = parser.parse_args(argv)
    if not SHARED.is_dir():
        print(f"{SHARED}: not here; the shared traces sit beside the checkout", file=sys.stderr)
        return 2
    text = table()
    if args.write:
        doc = DOC.read_text()
        head, rest = doc.split(BEGIN, 1)
        DOC.write_text(f"{head}{BEGIN}\n{text}\n{END}{rest.split(END, 1)[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
