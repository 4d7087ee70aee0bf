"""The README is a user's document: short, its quick starts run as written, and every file the docs cite
exists.

The quick starts are copied out of the README's ``## Quick start`` sections and run line by line with
bash in an empty directory that sees the checkout's inputs (``traces/``, ``examples/``, ``tests/``,
``scripts/``) and the
README's own ``mycase.py``; they write only into that directory's ``out/``. Lines marked ``# on a GPU:``
need one and are left out; ``fuseprof dashboard`` is a server, started and stopped by the dashboard tests.
"""

from __future__ import annotations

import glob
import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.conftest import FUSEPROF, ROOT

README = (ROOT / "README.md").read_text()
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _quick_start_lines() -> list[str]:
    lines = []
    for section in re.split(r"\n(?=## )", README):
        if section.startswith("## Quick start"):
            for block in re.findall(r"```bash\n(.*?)```", section, re.S):
                lines += [line for line in block.splitlines() if line.strip()]
    return lines


def test_the_readme_is_short_and_its_set_up_commands_are_what_ci_runs() -> None:
    assert len(README.splitlines()) <= 200
    ci = (ROOT / ".ci" / "run").read_text()
    test_command = next(line for line in README.splitlines() if line.endswith("-m pytest"))
    assert test_command in ci


def test_the_quick_starts_run_as_written_from_an_empty_directory(tmp_path: Path) -> None:
    for name in ("traces", "examples", "tests", "scripts"):
        (tmp_path / name).symlink_to(ROOT / name)
    case = re.search(r"```python\n# mycase.py\n(.*?)```", README, re.S)
    assert case is not None
    (tmp_path / "mycase.py").write_text(case.group(1))
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
           "PATH": f"{Path(FUSEPROF).parent}{os.pathsep}{os.environ['PATH']}"}
    ran = []
    for line in _quick_start_lines():
        if "# on a GPU:" in line or line.startswith("fuseprof dashboard"):
            continue
        done = subprocess.run(["bash", "-c", f"set -o pipefail; {line}"], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=600)
        assert done.returncode == 0, (line, done.stderr[-2000:])
        ran.append(line.split()[:2])
    assert ["fuseprof", "analyze"] in ran and ["fuseprof", "profile"] in ran and ["fuseprof", "run"] in ran
    assert (tmp_path / "out" / "llama4l-compiled.json").stat().st_size > 0
    assert not any(p for p in (ROOT / "traces").iterdir() if p.name.startswith(("mycase", "run-region_demo-h200-2026113")))


def _cited_paths() -> list[tuple[Path, str]]:
    cited = []
    for doc in DOCS:
        for match in re.finditer(r"(?<![\w/.-])((?:traces|tests/fixtures|examples|scripts|notebooks|kernels|docs)/"
                                 r"[\w.\-/…*]+)", doc.read_text()):
            path = match.group(1).rstrip(".,:;)")
            if path.startswith("out/"):
                continue
            cited.append((doc, path))
    return cited


@pytest.mark.parametrize("doc", [d.name for d in DOCS])
def test_every_file_the_docs_cite_exists(doc: str) -> None:
    missing = [path for d, path in _cited_paths() if d.name == doc
               and not glob.glob(str(ROOT / path.replace("…", "*")))]
    assert not missing, f"{doc} cites files that do not exist: {missing}"
