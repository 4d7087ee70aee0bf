"""Which row of the device table each GPU a shared trace's ``deviceProperties`` names resolves to.

    python scripts/device_rows.py [FOLDER]

Every ``*.json.gz`` under FOLDER (default ``../shared/thirdparty-traces``) is read for its ``deviceProperties``; each
distinct device (name, arch, SMs/CUs, memory, warp) is printed with the row ``devices.identify`` gives it — or
``UNKNOWN`` and why — and one trace that holds it. Issue 60: every device gets its own roof or an explicit unknown
GPU, never silently another's (``tests/test_devices_by_properties.py`` holds the expected rows).
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def devices_in(folder: Path) -> dict[tuple[object, ...], tuple[str, str]]:
    """Per distinct device: (the row or UNKNOWN with why, a trace holding it)."""
    from fuseprof.model.devices import identify
    from fuseprof.parse.trace_events import _Device

    seen: dict[tuple[object, ...], tuple[str, str]] = {}
    for path in sorted(folder.rglob("*.json.gz")):
        try:
            with gzip.open(path, "rt", errors="replace") as handle:
                data = json.load(handle)
        except (OSError, ValueError, EOFError):
            continue
        listed = data.get("deviceProperties") if isinstance(data, dict) else None
        for entry in listed if isinstance(listed, list) else []:
            if not isinstance(entry, dict):
                continue
            fields = {k: v for k, v in entry.items() if k in _Device.__struct_fields__}
            properties = _Device(**fields).properties()
            key = (entry.get("name"), properties.get("major"), properties.get("minor"), properties.get("sms"),
                   round(properties.get("memory_bytes", 0) / 1e9, 1), properties.get("warp"))
            if key not in seen:
                found = identify(entry.get("name"), properties)
                seen[key] = (found.key or f"UNKNOWN ({found.why})", str(path.relative_to(folder)))
    return seen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", nargs="?", type=Path, default=ROOT.parent / "shared" / "thirdparty-traces")
    args = parser.parse_args(argv)
    for (name, major, minor, sms, memory, warp), (row, where) in devices_in(args.folder).items():
        print(f"{name!r:32} arch {major}.{minor} {sms} SMs/CUs {memory} GB warp {warp} -> {row}  [{where}]")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main())
