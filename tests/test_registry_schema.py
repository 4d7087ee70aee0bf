"""Hostile ``--registry`` files (issue 58, "registry values are not type-checked"; issue 60, build 5): every
value is checked against the row class it fills, before any row is made. Each case goes through the CLI and
must end in exit 2 with at most 21 short lines naming the file (one line per error, 20 shown, then how many
more), or — for files that are right — in the registry the same rows make in Python. Before the schema,
``replayable = "no"`` was true, ``kinds = "add"`` was {'a', 'd'}, five files here ended in a traceback, a FIFO
hung, a nested repeat hung the first search of a long name and a megabyte regex came back whole on stderr. Outcomes are counted in the fuzz summary line."""

from __future__ import annotations

import gzip
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from fuseprof.model.registry import KernelArgument, KernelMatch, OpKinds, OpRole
from fuseprof.model.registry_data import DEFAULT
from fuseprof.model.registry_schema import load_registry
from tests.conftest import FIXTURES, FUZZ_RESULTS
from tests.test_fuzz_inputs import _run

TRACE = FIXTURES / "bundles" / "rmsnorm_swiglu-float16-h200-20261129t084609z" / "raw" / "profiler_trace.json.gz"
MAX_STDERR = 4_000  # 21 lines of at most ~190 characters: a hostile file never gets more


def _text(text: str) -> Callable[[Path], Path]:
    def write(tmp: Path) -> Path:
        path = tmp / "mine.toml"
        path.write_text(text, encoding="utf-8")
        return path
    return write


def _bytes(data: bytes) -> Callable[[Path], Path]:
    def write(tmp: Path) -> Path:
        path = tmp / "mine.toml"
        path.write_bytes(data)
        return path
    return write


def _fifo(tmp: Path) -> Path:
    path = tmp / "mine.toml"
    os.mkfifo(path)  # nothing ever writes: opening it for reading would wait forever
    return path


def _directory(tmp: Path) -> Path:
    (tmp / "mine.toml").mkdir()
    return tmp / "mine.toml"


def _many_errors(tmp: Path) -> Path:
    path = tmp / "mine.toml"
    path.write_text("".join(f"[[role]]\nname = 'aten::op{i}'\nreplayable = 'yes'\n" for i in range(1000)))
    return path


ROLE = "[[role]]\nname = 'aten::x'\n"
FAMILY = "[[family]]\ncategory = 'GEMM'\n"
KINDS = "[[op_kinds]]\nop = '^mylib::f$'\n"
MATCH = "[[kernel_match]]\npattern = 'aten::add'\ncase = 'add_rms_norm'\nvariant = 'fused'\n"

# name: (the file, what its one error line says). Old outcome in the comment: how the loader before the
# schema took it.
HOSTILE: dict[str, tuple[Callable[[Path], Path], str]] = {
    # silently wrong before: the value was taken as Python reads it
    "a bool given as the string 'no'": (_text(ROLE + "replayable = 'no'\n"), "replayable: expected true or false, got 'no'"),
    "kinds given as one string": (_text(KINDS + "kinds = 'add'\n"), "kinds: expected a list, each a string, got 'add'"),
    "a list of kinds holding a number": (_text(KINDS + "kinds = ['add', 1]\n"), "kinds[1]: expected a string, got 1"),
    "first_argument not one of its values": (_text(ROLE + "first_argument = 'written'\n"),
                                             "first_argument: expected one of 'read', 'overwritten', 'indexed write'"),
    "a family with no pattern": (_text(FAMILY), "give at least one of op, kernel"),
    "a host cause not one of its causes": (_text("[[host_cause]]\ncause = 'gc'\ncalls = 'x'\n"), "cause: expected one of"),
    "a view rule fuseprof does not know": (_text(ROLE + "view = 'reshape'\n"), "view: expected one of 'size'"),
    "a cost field given as a string": (_text(FAMILY + "op = 'x'\ncost = {model = 'elementwise', flops_per_element = '8'}\n"),
                                       "flops_per_element: expected a finite number, got '8'"),
    "an optimizer's states given as true": (_text("[[optimizer]]\nranges = 'Adam'\nstates = true\n"),
                                            "states: expected an integer, got True"),
    "a wrapped number that is NaN": (_text(ROLE + "wrapped_number = nan\n"), "wrapped_number: expected a finite number"),
    "indexing with two of its three places": (_text(ROLE + "indexing = [0, 2]\n"), "indexing: expected a list of 3"),
    "an empty required regex (matches every range)": (_text("[[phase_range]]\nphase = 'optimizer'\nranges = ''\n"),
                                                      "ranges: expected a non-empty regular expression"),
    "a named group the regex lacks": (_text(KINDS + "named = 'kind'\n"), "named: expected the name of a (?P<name>...) group"),
    "a catalogue pattern misspelt": (_text("[[catalogue]]\nname = 'x'\npattern = 'chian'\n"), "pattern: expected one of 'add_rmsnorm'"),
    "two families with the same patterns": (_text(FAMILY + "op = 'x'\n" + FAMILY + "op = 'x'\n"),
                                            "[[family]] #2: the same ('x', '') as [[family]] #1"),
    "two roles of the same op": (_text(ROLE + "epilogue = true\n" + ROLE + "softmax = true\n"),
                                 "[[role]] #2: the same 'aten::x' as [[role]] #1"),
    "a regex that backtracks exponentially": (_text(FAMILY + "op = '(a+)+$'\n"), "op: could take exponential time"),
    # a traceback before
    "a nested table with an unknown key": (_text(ROLE + "gemm = {foo = 1}\n"), "gemm: unknown key 'foo'"),
    "kernel arguments that are not tables": (_text(MATCH + "arguments = [1]\n"), "arguments[0]: expected a table of step"),
    "a section given as a number": (_text("family = 1\n"), "family: expected [[family]] tables"),
    "TOML nested 100,000 deep": (_text("x = " + "[" * 100_000 + "]" * 100_000 + "\n"), "nested too deeply"),
    # a hang or a memory blow-up before
    "a FIFO": (_fifo, "not a regular file"),
    "/dev/zero": (lambda tmp: Path("/dev/zero"), "not a regular file"),
    "a file over the size bound": (_text("# padding\n" * 1_000_000), "larger than 8 MiB"),
    "more rows than the bound (each costs a check)": (_text("[[kind_rule]]\nkind = 'k'\nany_of = ['a']\n" * 10_001),
                                                     "10,001 rows; a registry file holds at most 10,000"),
    # megabytes on stderr before
    "a megabyte invalid regex": (_text(FAMILY + "op = '(" + "a" * 1_000_000 + "'\n"), "op: not a valid regular expression"),
    "a megabyte unknown key": (_text(ROLE + "k" * 1_000_000 + " = 1\n"), "(1,000,002 characters)"),
    "a thousand errors": (_many_errors, "and 980 more errors"),
    # a clear error before as well: held
    "not UTF-8": (_bytes(b"[[role]]\nname = '\xff\xfe'\n"), "not UTF-8 text"),
    "a gzip file": (_bytes(gzip.compress(b"[[role]]\nname = 'x'\n")), "not UTF-8 text"),
    "a directory": (_directory, "is a folder"),
    "an unknown key (a typo)": (_text(ROLE + "epilogu = true\n"), "did you mean 'epilogue'?"),
    "a required field missing": (_text("[[kernel_match]]\npattern = 'x'\ncase = 'c'\nvariant = 'v'\n"),
                                 "arguments: required, a list, each a table of step"),
    "a single [family] table": (_text(FAMILY.replace("[[family]]", "[family]") + "op = 'x'\n"),
                                "family: expected [[family]] tables"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_registry_file_is_a_clear_error(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write, said = HOSTILE[name]
    path = write(tmp_path)
    code, _, err = _run(["analyze", str(TRACE), "--registry", str(path)], capsys)
    lines = err.strip().splitlines()
    assert code == 2 and said in err, (code, err[:2000])
    assert len(err) < MAX_STDERR and len(lines) <= 21 and "Traceback" not in err, (len(err), err[:2000])
    assert lines[0].startswith("fuseprof: error: ") and all(str(path) in line for line in lines[:20])
    FUZZ_RESULTS["clear error"] += 1


def test_a_thousand_errors_show_the_first_twenty(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _many_errors(tmp_path)
    code, _, err = _run(["analyze", str(TRACE), "--registry", str(path)], capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 21 and lines[-1] == "and 980 more errors"
    assert [line.split(", ")[1] for line in lines[:20]] == [f"[[role]] #{i}" for i in range(1, 21)]


ACCEPTED: dict[str, tuple[str, Callable[[], object]]] = {
    "an empty file": ("", lambda: DEFAULT),
    "comments only": ("# nothing to add\n\n", lambda: DEFAULT),
    "kinds as a list": (KINDS + "kinds = ['add']\n", lambda: DEFAULT.extend(op_kinds=[OpKinds(op="^mylib::f$", kinds=("add",))])),
    "a causal rule: an integer and a list in one array": (
        ROLE + "causal = [3, ['True']]\nreplayable = true\n",
        lambda: DEFAULT.extend(roles=[OpRole("aten::x", causal=(3, ("True",)), replayable=True)])),
    "kernel arguments by name and by index": (
        MATCH + "arguments = [{step = 'first', argument = 'input'}, {step = 2, argument = 1, rows = false}]\n",
        lambda: DEFAULT.extend(kernel_matches=[KernelMatch("aten::add", "add_rms_norm", "fused", (
            KernelArgument("first", "input"), KernelArgument(2, 1, rows=False)))])),
}


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_a_right_registry_file_is_the_registry_its_rows_make(name: str, tmp_path: Path) -> None:
    text, expected = ACCEPTED[name]
    path = _text(text)(tmp_path)
    loaded = load_registry(path, DEFAULT)
    assert loaded == expected() and loaded.fingerprint() == expected().fingerprint()  # type: ignore[attr-defined]
    FUZZ_RESULTS["identical"] += 1


def test_the_catalogue_patterns_are_the_patterns_the_audit_runs() -> None:
    """The schema's list of catalogue patterns is the audit's (a new pattern is allowed in a file at once)."""
    from fuseprof.analysis.judgements.patterns import PATTERNS
    from fuseprof.model.registry import CATALOGUE_PATTERNS

    assert set(CATALOGUE_PATTERNS) == set(PATTERNS)
