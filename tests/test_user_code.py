"""User code where users keep it: the README's own example, copied out of the README and run
verbatim from an empty directory; module and file specs; bugs in user modules as one line."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import fuseprof
from fuseprof.case import load_case
from fuseprof.errors import CaseNotFoundError, InvalidArgumentError
from tests.conftest import FUSEPROF, ROOT

README = (ROOT / "README.md").read_text()
SECTION = README[README.index("## Quick start: my kernel"):]
EXAMPLE = re.search(r"```python\n# mycase.py\n(.*?)```", SECTION, re.S).group(1)
CPU_LINE = next(line.split("#")[0].strip() for line in SECTION.splitlines() if "--device cpu" in line)


def test_readme_example_runs_verbatim_from_an_empty_directory(tmp_path: Path) -> None:
    (tmp_path / "mycase.py").write_text(EXAMPLE)
    argv = CPU_LINE.split()
    assert argv[:3] == ["fuseprof", "profile", "mycase:CASE"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([FUSEPROF, *argv[1:]], cwd=tmp_path, capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    bundle = Path(tmp_path / done.stdout.strip().splitlines()[-1])
    timings = fuseprof.load_timings(bundle)
    assert timings["correct"].all() and timings["shape"].tolist() == ["1024x8192"]


@pytest.fixture()
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    return tmp_path


def test_module_spec_resolves_from_the_current_directory(in_tmp: Path) -> None:
    (in_tmp / "case_from_cwd.py").write_text(EXAMPLE)
    assert load_case("case_from_cwd:CASE").name == "silu_mul"


def test_file_spec_resolves_a_path(in_tmp: Path) -> None:
    (in_tmp / "sub").mkdir()
    (in_tmp / "sub" / "my_file_case.py").write_text(EXAMPLE)
    assert load_case("sub/my_file_case.py:CASE").variant_names == ["unfused"]


@pytest.mark.parametrize(("body", "error", "line"), [
    ("import torch\nx = torh.ones(1)\n", "NameError: name 'torh' is not defined", 2),
    ("import torch\nimport no_such_dependency_xyz\n", "ModuleNotFoundError: No module named 'no_such_dependency_xyz'",
     2),
    ("def broken(:\n    pass\n", "SyntaxError", 1),
    ("raise RuntimeError('boom')\n", "RuntimeError: boom", 1),
])
def test_a_bug_in_the_user_module_is_one_line_with_their_file_and_line(in_tmp: Path, body: str, error: str,
                                                                         line: int) -> None:
    name = f"buggy_{abs(hash(body))}"
    (in_tmp / f"{name}.py").write_text(body)
    for spec in (f"{name}:CASE", f"{name}.py:CASE"):
        with pytest.raises(CaseNotFoundError) as info:
            load_case(spec)
        message = str(info.value)
        assert f"{name}.py:{line}" in message and error in message and "\n" not in message


def test_bad_variant_kind_and_shapes_are_refused(in_tmp: Path) -> None:
    (in_tmp / "kinds.py").write_text(EXAMPLE.replace('Variant("unfused", unfused, "unfused")',
                                                     'Variant("unfused", unfused, "eager")'))
    with pytest.raises(InvalidArgumentError, match="kind 'eager'"):
        load_case("kinds:CASE")
    (in_tmp / "shapes.py").write_text(EXAMPLE.replace("default_shapes=((4096, 8192),)",
                                                      "default_shapes=((4096, -1),)"))
    with pytest.raises(InvalidArgumentError, match="positive ints"):
        load_case("shapes:CASE")


@pytest.mark.parametrize(("old", "new", "line_of", "where"), [
    ("def unfused(x, y):    return torch.nn.functional.silu(x) * y",
     "def unfused(x, y):\n    return x.no_such_method()", "return x.no_such_method()", "variant 'unfused'"),
    ("    return tuple(torch.randn(shape, generator=generator, device=device)",
     "    raise ValueError('bad inputs')\n    return tuple(torch.randn(shape, generator=generator, device=device)",
     "raise ValueError('bad inputs')", "make_inputs"),
])
def test_a_bug_inside_a_variant_or_make_inputs_is_one_line(tmp_path: Path, old: str, new: str, line_of: str,
                                                            where: str) -> None:
    """The README's case with a bug in a variant's body or in make_inputs, profiled on CPU: one line with the
    user's file, the line of the bug and what fuseprof was calling."""
    assert old in EXAMPLE
    source = EXAMPLE.replace(old, new)
    (tmp_path / "mycase.py").write_text(source)
    line = source.splitlines().index(next(s for s in source.splitlines() if line_of in s)) + 1
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([FUSEPROF, "profile", "mycase:CASE", "--shapes", "64x64", "--device", "cpu", "--no-ncu",
                           "--out", str(tmp_path / "out")], cwd=tmp_path, capture_output=True, text=True, env=env,
                          timeout=300)
    errors = [x for x in done.stderr.splitlines() if x.startswith("fuseprof: error:")]
    assert done.returncode == 2 and len(errors) == 1 and "Traceback" not in done.stderr, done.stderr[-1500:]
    assert f"mycase.py:{line}:" in errors[0] and where in errors[0]
