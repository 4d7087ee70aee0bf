"""A registry file's schema: every ``[[table]]`` of a ``--registry`` TOML file checked against the row class it
makes, before any row is made.

The row classes of ``fuseprof.model.registry`` are the schema: a field's type hint says what a value may be
(``bool``: true or false, never the string "no", which Python calls true; ``tuple[str, ...]``: a list of
strings, never one string, which Python splits into letters), a field without a default is required, and a
key no field names is refused. What the hints cannot say is declared here, per class: which strings are
regular expressions (compiled, and bounded by ``fuseprof.model.safe_regex``), which values a
string may take, and which fields at least one of must be given (a family with neither ``op`` nor ``kernel``
matches nothing). Every error is one line — the file, the table and its number, the key, what was expected
and what was given, cut short — and at most ``SHOWN`` are printed, then how many more: a malformed file gets
a list to fix, never a traceback or megabytes of text.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import math
import re
import types
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from fuseprof.errors import InvalidArgumentError
from fuseprof.model import safe_regex
from fuseprof.model.dataflow import VIEW_RULES
from fuseprof.model.op_models import COST_MODELS
from fuseprof.model.registry import (
    CATALOGUE_PATTERNS,
    CATEGORIES,
    CatalogueEntry,
    ChainClass,
    HostCause,
    IterationRange,
    KernelMatch,
    KindRule,
    KnownFusion,
    OpFamily,
    OpKinds,
    OpRole,
    OptimizerModel,
    PhaseRange,
    Registry,
)

SECTIONS: Mapping[str, type] = {"family": OpFamily, "role": OpRole, "catalogue": CatalogueEntry,
                                "known_fusion": KnownFusion, "kernel_match": KernelMatch, "chain_class": ChainClass,
                                "op_kinds": OpKinds, "kind_rule": KindRule, "host_cause": HostCause,
                                "phase_range": PhaseRange, "optimizer": OptimizerModel,
                                "iteration_range": IterationRange}

# string fields holding regular expressions (an empty one is "not given"; a required one may not be empty)
REGEX_FIELDS: Mapping[type, tuple[str, ...]] = {
    OpFamily: ("op", "kernel"), OpKinds: ("op", "kernel"), CatalogueEntry: ("fused", "region"),
    KnownFusion: ("pattern",), KernelMatch: ("pattern",), HostCause: ("calls", "ranges"), PhaseRange: ("ranges",),
    OptimizerModel: ("ranges",), IterationRange: ("ranges",)}
# string fields that take one of a few values (``case`` stays "a string": which cases it may name is
# fuseprof.verify's rule)
ALLOWED: Mapping[tuple[type, str], tuple[str, ...]] = {
    (OpFamily, "category"): CATEGORIES, (OpFamily, "role"): ("", "anchor", "fusible"),
    (OpRole, "view"): ("", *VIEW_RULES), (CatalogueEntry, "pattern"): CATALOGUE_PATTERNS}
# groups of fields of which a row must give at least one: without them the row does nothing
ONE_OF: Mapping[type, tuple[tuple[str, ...], ...]] = {
    OpFamily: (("op", "kernel"),), OpKinds: (("op", "kernel"), ("kinds", "named", "listed")),
    HostCause: (("calls", "ranges"),), KindRule: (("any_of", "all_of"),)}
# fields naming a group of the row's regular expressions
GROUP_FIELDS: Mapping[type, tuple[str, ...]] = {OpKinds: ("named", "listed")}

SHOWN = 20  # errors printed; then "and N more"
MAX_ROWS = 10_000  # rows a file may hold: each is checked and its regexes compiled (~0.2 ms a row)
_CUT = 60  # characters of a value quoted in an error


class _Errors(list[str]):
    """Error lines found so far, each prefixed with where it was found."""

    def add(self, where: str, text: str) -> None:
        self.append(f"{where}: {text}")


def shown(value: Any) -> str:
    """A value as an error quotes it: its repr, cut to ``_CUT`` characters (a 40 MB regex is not echoed)."""
    text = repr(value)
    return text if len(text) <= _CUT else f"{text[:_CUT]}… ({len(text):,} characters)"


@functools.lru_cache(maxsize=512)
def regex_problem(pattern: str) -> str | None:
    """What is wrong with a registry regex, or None: it must compile, and not be a pattern whose search could
    take exponential time (``fuseprof.model.safe_regex``: ``re`` has no timeout, so the bound is on the form).
    Kept per pattern: the default registry's mined kernel families give each pattern twice (a family row and its
    kinds row), and the check costs ~0.3 ms a pattern in every process's start."""
    try:
        re.compile(pattern)
    except (re.error, OverflowError, RecursionError) as exc:
        return f"not a valid regular expression ({str(exc)[:_CUT]})"
    return safe_regex.regex_problem(pattern)


def describe(hint: Any) -> str:
    """What a type hint accepts, in the words of an error line."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is str:
        return "a string"
    if hint is bool:
        return "true or false"
    if hint is int:
        return "an integer"
    if hint is float:
        return "a finite number"
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(describe(a) for a in args if a is not type(None))
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return f"a list, each {describe(args[0])}"
    if origin is tuple:
        return f"a list of {len(args)} ({'; '.join(describe(a) for a in args)})"
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return f"a table of {', '.join(_fields(hint))}"
    if origin is Callable or hint is Callable:
        return f"a table {{model = ..., ...}} with model one of {', '.join(COST_MODELS)}"
    return str(hint)


@functools.cache
def _fields(cls: type) -> dict[str, dataclasses.Field[Any]]:
    """A row class's fields a file may give (its ``init`` fields), by name."""
    return {f.name: f for f in dataclasses.fields(cls) if f.init}


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    """A row class's resolved type hints: resolved once per class, not per row (``get_type_hints`` evaluates
    every annotation's text: 0.6 ms a row, most of an 8 MB file's time)."""
    return typing.get_type_hints(cls)


def _matches(hint: Any, value: Any) -> bool:
    """Whether a TOML value fits a hint as it stands (no conversion): for choosing among a union's members."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if hint is str:
        return isinstance(value, str)
    if origin is typing.Literal:
        return any(type(value) is type(a) and value == a for a in args)
    return False


def convert(hint: Any, value: Any, where: str, errors: _Errors) -> Any:
    """``value`` made into what ``hint`` names — TOML lists into tuples, tables into the dataclass they
    describe, a cost table into its cost model — or an error added and None returned."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        members = [a for a in args if a is not type(None)]  # TOML has no null: an optional field is given or not
        if len(members) == 1:
            return convert(members[0], value, where, errors)
        if any(_matches(m, value) for m in members):
            return value
    elif origin is tuple:
        if not isinstance(value, list):
            errors.add(where, f"expected {describe(hint)}, got {shown(value)}")
            return None
        items = args[:1] * len(value) if len(args) == 2 and args[1] is Ellipsis else args
        if len(items) != len(value):
            errors.add(where, f"expected {describe(hint)}, got {len(value)} values")
            return None
        return tuple(convert(h, v, f"{where}[{i}]", errors) for i, (h, v) in enumerate(zip(items, value)))
    elif dataclasses.is_dataclass(hint) and isinstance(hint, type):
        if not isinstance(value, dict):
            errors.add(where, f"expected {describe(hint)}, got {shown(value)}")
            return None
        return make(hint, value, where, errors)
    elif origin is Callable or hint is Callable:  # the cost model: {model = NAME, ...its fields}
        return _cost(value, where, errors)
    elif _matches(hint, value):
        return value
    errors.add(where, f"expected {describe(hint)}, got {shown(value)}")
    return None


def _cost(value: Any, where: str, errors: _Errors) -> Any:
    if not isinstance(value, dict) or value.get("model") not in COST_MODELS:
        errors.add(where, f"expected {describe(Callable)}, got {shown(value)}")
        return None
    return make(COST_MODELS[value["model"]], {k: v for k, v in value.items() if k != "model"}, where, errors)


def _keys_known(cls: type, data: dict[str, Any], where: str, errors: _Errors) -> None:
    """Every key names a field and every required field is given; each unknown key is an error (with the
    closest field name, if any), as is each missing field."""
    known = _fields(cls)
    unknown = [k for k in data if k not in known]
    for key in unknown:
        close = difflib.get_close_matches(str(key), list(known), n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        errors.add(where, f"unknown key {shown(key)}; {hint}the keys are {', '.join(known)}")
    missing = [n for n, f in known.items() if f.default is dataclasses.MISSING
               and f.default_factory is dataclasses.MISSING and n not in data]
    for name in missing:
        errors.add(f"{where}, {name}", f"required, {describe(_hints(cls)[name])}")


def _row_rules(cls: type, values: dict[str, Any], where: str, errors: _Errors) -> None:
    """The rules of ``REGEX_FIELDS``, ``ALLOWED``, ``ONE_OF`` and ``GROUP_FIELDS`` on a row's values (a value
    of the wrong type was reported already: it counts as given, without a second error)."""
    required = {n for n, f in _fields(cls).items() if f.default is dataclasses.MISSING}
    compiled: list[re.Pattern[str]] = []
    for name in REGEX_FIELDS.get(cls, ()):
        pattern = values.get(name)
        if not isinstance(pattern, str):
            continue
        if not pattern and name in required:
            errors.add(f"{where}, {name}", "expected a non-empty regular expression (an empty one matches everything)")
        elif pattern:
            problem = regex_problem(pattern)
            if problem:
                errors.add(f"{where}, {name}", f"{problem}: {shown(pattern)}")
            else:
                compiled.append(re.compile(pattern))
    for name, allowed in ((n, a) for (c, n), a in ALLOWED.items() if c is cls):
        if isinstance(values.get(name), str) and values[name] not in allowed:
            errors.add(f"{where}, {name}", f"expected one of {', '.join(repr(a) for a in allowed if a)}, "
                                           f"got {shown(values[name])}")
    for group in ONE_OF.get(cls, ()):
        if not any(values.get(n) or (n in values and values[n] is None) for n in group):
            errors.add(where, f"give at least one of {', '.join(group)} (without them the row matches or adds nothing)")
    for name in GROUP_FIELDS.get(cls, ()):
        group_name = values.get(name)
        if isinstance(group_name, str) and group_name and not any(group_name in p.groupindex for p in compiled):
            errors.add(f"{where}, {name}", f"expected the name of a (?P<name>...) group of the row's regular "
                                           f"expression, got {shown(group_name)}")


def make(cls: type, data: dict[str, Any], where: str, errors: _Errors) -> Any:
    """One row (or nested table) of class ``cls`` from a TOML table, every field checked; None where any is wrong."""
    before = len(errors)
    _keys_known(cls, data, where, errors)
    hints, known = _hints(cls), _fields(cls)
    values = {name: convert(hints[name], value, f"{where}, {name}", errors) for name, value in data.items()
              if name in known}
    _row_rules(cls, values, where, errors)
    if len(errors) > before:
        return None
    try:
        return cls(**values)
    except (InvalidArgumentError, TypeError, ValueError) as exc:  # the class's own checks (optimizer states ≥ 0)
        errors.add(where, str(exc)[:200])
        return None


def rows(document: dict[str, Any], where: str) -> dict[str, list[Any]]:
    """The rows of a parsed registry file, per table name of ``SECTIONS``; every error in the file raised
    together as one ``InvalidArgumentError``, one line each (the first ``SHOWN``, then how many more)."""
    errors = _Errors()
    for name in document:
        if name not in SECTIONS:
            close = difflib.get_close_matches(str(name), list(SECTIONS), n=1)
            hint = f"did you mean [[{close[0]}]]? " if close else ""
            errors.add(where, f"unknown table {shown(name)}; {hint}the tables are "
                              f"{', '.join(f'[[{k}]]' for k in SECTIONS)}")
    count = sum(len(t) for k, t in document.items() if k in SECTIONS and isinstance(t, list))
    if count > MAX_ROWS:
        raise InvalidArgumentError(f"{where}: {count:,} rows; a registry file holds at most {MAX_ROWS:,} (the default "
                                   "registry has a few hundred)")
    made: dict[str, list[Any]] = {kind: [] for kind in SECTIONS}
    for kind, cls in SECTIONS.items():
        tables = document.get(kind, [])
        if not isinstance(tables, list):
            errors.add(f"{where}, {kind}", f"expected [[{kind}]] tables (an array of tables), got {shown(tables)}")
            continue
        for i, table in enumerate(tables):
            at = f"{where}, [[{kind}]] #{i + 1}"
            if not isinstance(table, dict):
                errors.add(at, f"expected a table of fields, got {shown(table)}")
                continue
            made[kind].append(make(cls, table, at, errors))
    _duplicates(made, where, errors)
    if errors:
        more = f"\nand {len(errors) - SHOWN:,} more errors" if len(errors) > SHOWN else ""
        raise InvalidArgumentError("\n".join(errors[:SHOWN]) + more)
    return made


_KEYS: Mapping[str, Callable[[Any], Any]] = {
    "family": lambda r: (r.op, r.kernel), "role": lambda r: r.name, "catalogue": lambda r: r.name,
    "known_fusion": lambda r: r.pattern, "kernel_match": lambda r: r.pattern, "chain_class": lambda r: r.name}


def _duplicates(made: dict[str, list[Any]], where: str, errors: _Errors) -> None:
    """A row whose key an earlier row of the same file holds: it would be shadowed (the first family or match
    wins) or replace the earlier one (a role, a catalogue entry) without a word — a mistake either way."""
    for kind, key in _KEYS.items():
        first: dict[Any, int] = {}
        for i, row in enumerate(made[kind]):
            if row is None:
                continue
            if key(row) in first:
                errors.add(f"{where}, [[{kind}]] #{i + 1}", f"the same {shown(key(row))} as [[{kind}]] "
                                                           f"#{first[key(row)] + 1}: give each once")
            else:
                first[key(row)] = i


REGISTRY_BYTES = 8 << 20  # a registry file's size bound: rows of text (registry_schema.MAX_ROWS bounds their count)


def load_registry(path: Path, base: Registry) -> Registry:
    """``base`` (``fuseprof.model.registry_data.DEFAULT``) extended by a TOML file of ``[[family]]``, ``[[role]]``,
    ``[[catalogue]]``, ``[[known_fusion]]``, ``[[kernel_match]]``, ``[[chain_class]]``, ``[[op_kinds]]``,
    ``[[kind_rule]]``, ``[[host_cause]]``, ``[[phase_range]]``, ``[[optimizer]]`` and ``[[iteration_range]]`` tables (fields as
    the classes of ``fuseprof.model.registry`` name them; a family's ``cost = {model = "elementwise", flops_per_element =
    8}``), checked against ``fuseprof.model.registry_schema``: one line per error, naming the file, the table
    and the key. Only a regular file of at most ``REGISTRY_BYTES`` is read (a FIFO would hang, /dev/zero
    never end)."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    from fuseprof.parse.textio import read_settings

    where = f"--registry {path}"
    text = read_settings(path, where, REGISTRY_BYTES)  # a regular file, bounded, UTF-8: one line otherwise
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InvalidArgumentError(f"{where}: not valid TOML ({str(exc)[:200]})") from None
    except RecursionError:
        raise InvalidArgumentError(f"{where}: not valid TOML (nested too deeply)") from None
    made = rows(data, where)
    return base.extend(made["family"], made["role"], made["catalogue"], made["known_fusion"], made["kernel_match"],
                       made["chain_class"], made["op_kinds"], made["kind_rule"], made["host_cause"],
                       made["phase_range"], made["optimizer"], made["iteration_range"])
