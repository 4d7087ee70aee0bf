"""Whether the core install (pyproject's ``dependencies``: what reading and analysing traces needs) has a wheel for
every package it pulls in on Linux aarch64 (GH200/GB200 hosts), asked of pip from any machine:

    python scripts/check_core_wheels.py [--python-version 3.11] [--extra capture]     (Python >= 3.11: tomllib)

``pip download --only-binary=:all: --platform ... --python-version ...`` resolves the core dependencies, the
packages they depend on included, as a pip on that platform would, and keeps the wheels it would install; each
package is then named with the wheel it got, or "NO WHEEL". It runs twice: for a glibc 2.17 host
(``manylinux2014_aarch64``, the oldest manylinux a wheel may claim) and for a glibc 2.35 host (Ubuntu 22.04, what
NVIDIA's GH200 systems run), whose pip accepts every manylinux_2_17 … manylinux_2_35 wheel; ``--platform`` given
explicitly, pip does not widen one tag to the older ones, so they are listed. ``--extra NAME`` adds an extra's
packages after the core's, one at a time (an extra's missing wheel is no failure of the core). Needs the network
(PyPI); not part of CI. Exit 1 when a core package has no wheel for the glibc 2.35 host.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
HOSTS = {
    "glibc 2.17 (manylinux2014_aarch64)": ["manylinux2014_aarch64"],
    "glibc 2.35 (Ubuntu 22.04, GH200)": [f"manylinux_2_{minor}_aarch64" for minor in range(35, 16, -1)],
}


def requirements(extra: str | None = None) -> list[str]:
    """pyproject's core dependencies, or an extra's own requirements (the extras it names left out)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    found = project["dependencies"] if extra is None else project["optional-dependencies"][extra]
    return [r for r in found if not r.startswith("fuseprof[")]


def _name(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def download(requirements: list[str], platforms: list[str], python: str, deps: bool) -> tuple[list[str], str]:
    """The wheel files pip picked for ``requirements`` on that platform (with their dependencies if ``deps``), and
    pip's last error line where it found none."""
    with tempfile.TemporaryDirectory() as folder:
        argv = [sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "--python-version", python,
                "--implementation", "cp", "-d", folder, *[a for p in platforms for a in ("--platform", p)]]
        done = subprocess.run([*argv, *([] if deps else ["--no-deps"]), *requirements], capture_output=True,
                              text=True)
        wheels = sorted(p.name for p in Path(folder).glob("*.whl"))
        errors = [line for line in done.stderr.splitlines() if line.startswith("ERROR")]
        return wheels, errors[-1] if errors else ""


def _package(wheel: str) -> str:
    return wheel.split("-")[0].lower().replace("_", "-")


def check(host: str, platforms: list[str], python: str, extras: list[str]) -> bool:
    """Print each package's wheel for one host; whether every core package has one."""
    print(f"== Linux aarch64, {host}, CPython {python}")
    core = requirements()
    wheels, error = download(core, platforms, python, deps=True)
    if error:  # the whole set did not resolve: say which package by asking for each alone
        print(f"  the core set does not resolve: {error}")
        ok = True
        for requirement in core:
            alone, why = download([requirement], platforms, python, deps=False)
            ok &= bool(alone)
            print(f"  {requirement:24s} {alone[0] if alone else 'NO WHEEL (' + why + ')'}")
        return ok
    got = {_package(w): w for w in wheels}
    for requirement in core:
        print(f"  {requirement:24s} {got.get(_name(requirement), 'NO WHEEL')}")
    others = [w for name, w in sorted(got.items()) if name not in {_name(r) for r in core}]
    print(f"  and what they depend on ({len(others)}): {', '.join(others)}")
    for extra in extras:
        for requirement in requirements(extra):
            alone, why = download([requirement.split(";")[0]], platforms, python, deps=False)
            print(f"  [{extra}] {requirement.split(';')[0]:24s} {alone[0] if alone else 'NO WHEEL (' + why + ')'}")
    return all(_name(r) in got for r in core)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python-version", default="3.11")
    parser.add_argument("--extra", action="append", default=[], help="an extra whose packages to ask for too")
    args = parser.parse_args()
    results = {host: check(host, platforms, args.python_version, args.extra) for host, platforms in HOSTS.items()}
    for host, ok in results.items():
        print(f"core on {host}: {'every package has a wheel' if ok else 'a package has NO WHEEL'}")
    return 0 if list(results.values())[-1] else 1


if __name__ == "__main__":
    sys.exit(main())
