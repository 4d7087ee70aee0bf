"""Which regular expressions from a user's registry may be searched in kernel and op names without a time bound.

Python's ``re`` backtracks and has no timeout: ``(a+)+$`` searched in a name of thirty ``a`` and a ``!`` takes
minutes, and a C++ kernel name is kilobytes long. A running search cannot be stopped, so the bound is put on the
pattern instead, where it is read (``regex_problem``; the registry schema, ``fuseprof.model.registry_schema``,
calls it for every regex of a ``--registry`` file), and each distinct name is searched once
(``fuseprof.model.registry.classify``). Refused, with the reason:

- a repeat inside a repeat where either can take a varying number of turns (``(a+)+``, ``(\\w*x?)*``, ``(a{1,9})+``):
  the ways to split a run of text between the two grow exponentially with its length (an optional part,
  ``(\\w+::)?``, takes one turn at most: nothing to split, allowed);
- a repeated alternation whose branches can start on the same character (``(a|aa)+``, ``(.|x)+``): the same, one
  choice per turn;
- a search whose time could grow as the name's length to a power over ``MAX_DEGREE``: each unbounded repeat of a
  class that matches nearly anything (``.*``, ``[^_]*``, unless a literal it cannot match follows) multiplies it by
  the length, and so does a search that may start anywhere (not anchored by ``^`` or a literal of 3 characters):
  ``a.*a.*b`` on 4,000 a's takes 17 s, ``a.*b`` 0.07 s. ``\\w*`` is not counted: a name's separators (``::``,
  ``<``, ``(``, spaces) stop it.

Possessive repeats and atomic groups (``a*+``, ``(?>...)``) never backtrack and are allowed. What is left runs in
time polynomial in the name's length with a small degree.
"""

from __future__ import annotations

import re
from typing import Any

try:  # the parser ``re`` itself uses: the pattern's structure exactly as it will be matched
    from re import _constants as _c  # type: ignore[attr-defined]
    from re import _parser as _p  # type: ignore[attr-defined]
except ImportError:  # Python 3.10
    import sre_constants as _c  # type: ignore[no-redef]
    import sre_parse as _p  # type: ignore[no-redef]

MAX_DEGREE = 2  # a search's time grows as the name's length to this power at most
MAX_PATTERN_CHARS = 2000  # a registry regex names ops and kernels; a longer one is a file's damage
_REPEATS = {_c.MAX_REPEAT, _c.MIN_REPEAT}


def _items(node: Any) -> list[tuple[Any, Any]]:
    return list(node.data) if hasattr(node, "data") else list(node)


def _children(op: Any, av: Any) -> list[Any]:
    """The sub-patterns of one parsed item (a group's body, a repeat's body, an alternation's branches)."""
    if op in _REPEATS or op == getattr(_c, "POSSESSIVE_REPEAT", None):
        return [av[2]]
    if op == _c.SUBPATTERN:
        return [av[-1]]
    if op == _c.BRANCH:
        return list(av[1])
    if op in (_c.ASSERT, _c.ASSERT_NOT):
        return [av[1]]
    if op == getattr(_c, "ATOMIC_GROUP", None):
        return [av]
    if op == _c.GROUPREF_EXISTS:
        return [b for b in av[1:] if b is not None]
    return []


def _varies(lo: int, hi: int) -> bool:
    return lo != hi


def _chars(node: Any, single: bool) -> set[int] | None:
    """The characters ``node`` can start with (``single``: one turn of a single-item repeat body can match, the
    node being that one item); None where it is not a small known set (or can start with nothing)."""
    items = _items(node)
    if not items or (single and len(items) != 1):
        return None
    op, av = items[0]
    if op == _c.LITERAL:
        return {av}
    if op == _c.IN:
        return _class_chars(av)
    if op == _c.SUBPATTERN:
        return _chars(av[-1], single)
    if not single and op in _REPEATS and av[0] > 0:  # a repeat taken at least once starts as its body does
        return _chars(av[2], single)
    return None


def _varying_repeats(node: Any) -> list[Any]:
    """The bodies of the repeats inside ``node`` that take a varying number of turns."""
    found = []
    for op, av in _items(node):
        if op in _REPEATS and _varies(av[0], av[1]):
            found.append(av[2])
        if op != getattr(_c, "ATOMIC_GROUP", None) and op != getattr(_c, "POSSESSIVE_REPEAT", None):
            for child in _children(op, av):
                found += _varying_repeats(child)
    return found


def _ambiguous_nesting(body: Any) -> bool:
    """Whether a varying repeat's ``body`` holds a varying repeat that could take the text where a turn of the
    outer one starts: safe only when every turn starts with a character none of the inner repeats can match (as
    ``(?:_[a-z0-9]+)*``, whose turns each begin at an underscore)."""
    inner = _varying_repeats(body)
    if not inner:
        return False
    starts = _chars(body, single=False)
    if starts is None:
        return True
    return any((chars := _chars(b, single=True)) is None or chars & starts for b in inner)


def _class_chars(av: Any) -> set[int] | None:
    if any(o in (_c.NEGATE, _c.CATEGORY) for o, _ in av):
        return None
    chars: set[int] = set()
    for o, v in av:
        if o == _c.LITERAL:
            chars.add(v)
        elif o == _c.RANGE:
            if v[1] - v[0] > 256:
                return None
            chars.update(range(v[0], v[1] + 1))
        else:
            return None
    return chars


def _branches(node: Any) -> list[Any]:
    """Every alternation inside ``node`` (not inside an atomic group or a possessive repeat): its branch lists."""
    found = []
    for op, av in _items(node):
        if op == _c.BRANCH:
            found.append(av[1])
        if op != getattr(_c, "ATOMIC_GROUP", None) and op != getattr(_c, "POSSESSIVE_REPEAT", None):
            for child in _children(op, av):
                found += _branches(child)
    return found


def _overlapping_branches(body: Any) -> bool:
    """Whether a varying repeat's ``body`` holds an alternation with two ways over the same text: two branches
    that can start on the same character, or an empty branch beside one that can start as a turn does
    (``(a|aa)+``: ``aa`` is one turn or two)."""
    turn = _chars(body, single=False)
    for branches in _branches(body):
        seen: set[int] = set()
        empty = any(not _items(b) for b in branches)
        for branch in branches:
            if not _items(branch):
                continue
            chars = _chars(branch, single=False)
            if chars is None or chars & seen or (empty and (turn is None or chars & turn)):
                return True
            seen |= chars
    return False


def _problem_in(node: Any) -> str | None:
    for op, av in _items(node):
        # an optional part (``(\w+::)?``: at most one turn) has no turns to split text between, however its body
        # repeats: only a repeat that can take several turns, a varying number of them, is exponential
        if op in _REPEATS and av[1] > 1 and _varies(av[0], av[1]):
            if _ambiguous_nesting(av[2]):
                return "a repeat inside a repeat (as in (a+)+)"
            if _overlapping_branches(av[2]):
                return "a repeated alternation with two ways over the same text (as in (a|aa)+)"
        if op == getattr(_c, "ATOMIC_GROUP", None) or op == getattr(_c, "POSSESSIVE_REPEAT", None):
            continue  # never backtracks
        for child in _children(op, av):
            found = _problem_in(child)
            if found:
                return found
    return None


def _open(body: Any) -> set[int] | None:
    """For a repeat's body of one class that matches nearly any character (``.``, ``[^_]``): the characters it
    cannot match; None for any other body (``\\w``, ``[a-z]``, a group: a name's separators stop them)."""
    items = _items(body)
    if len(items) != 1:
        return None
    op, av = items[0]
    if op == _c.ANY:
        return set()
    if op == _c.NOT_LITERAL:
        return {av}
    if op == _c.IN and av and av[0][0] == _c.NEGATE:
        return _class_chars(av[1:]) or set()
    return None


def _open_repeats(node: Any) -> int:
    """Unbounded repeats of a class that matches nearly anything (``.*``, ``[^_]+``) one after another on the
    longest way through ``node`` (an alternation's branches are tried one at a time: the most of any), leaving out
    one followed by a literal it cannot match (``[^_]*_``: it takes one way over the text, not every way). A
    lookaround (``(?=.*gemm)``) consumes nothing and is never re-entered once it has answered: its search is paid
    once per way of reaching it, so its repeats count after those before it but not before those after it
    (``^(?=.*a)(?!.*b).*c`` is three searches of one ``.*`` each, not one of three)."""
    count = 0
    most = 0  # the longest way through a lookaround seen so far
    items = _items(node)
    for i, (op, av) in enumerate(items):
        if op == getattr(_c, "ATOMIC_GROUP", None) or op == getattr(_c, "POSSESSIVE_REPEAT", None):
            continue
        if op in (_c.ASSERT, _c.ASSERT_NOT):
            most = max(most, count + _open_repeats(av[1]))
            continue
        if op in _REPEATS and av[1] == _c.MAXREPEAT and (excluded := _open(av[2])) is not None:
            following = items[i + 1] if i + 1 < len(items) else None
            count += not (following is not None and following[0] == _c.LITERAL and following[1] in excluded)
        elif op == _c.BRANCH:
            count += max((_open_repeats(b) for b in av[1]), default=0)
        else:
            count += sum(_open_repeats(c) for c in _children(op, av))
    return max(count, most)


def _paths(tree: Any) -> list[Any]:
    """The top-level alternatives of a pattern (``a|b``), each searched from every position on its own."""
    items = _items(tree)
    if len(items) == 1 and items[0][0] == _c.BRANCH:
        return list(items[0][1][1])
    return [tree]


def _held(path: Any) -> bool:
    """Whether a search of ``path`` starts at few places: anchored (``^``, ``\\A``) or on a literal of three
    characters or more, which an adversary's run of one character cannot repeat at every position."""
    items = _items(path)
    if items and items[0][0] == _c.AT and items[0][1] in (_c.AT_BEGINNING, _c.AT_BEGINNING_STRING):
        return True
    literal = 0
    for op, _ in items:
        if op != _c.LITERAL:
            break
        literal += 1
    return literal >= 3


def regex_problem(pattern: str) -> str | None:
    """Why ``pattern`` may not be searched in names without a time bound (the module docstring's rules), or None."""
    if len(pattern) > MAX_PATTERN_CHARS:
        return f"{len(pattern):,} characters long (at most {MAX_PATTERN_CHARS:,})"
    try:
        tree = _p.parse(pattern)
    except (re.error, OverflowError, RecursionError) as exc:
        return f"not a valid regular expression ({exc})"
    found = _problem_in(tree)
    if found:
        return f"could take exponential time on a long name: {found}; write it without the nesting"
    opened = max(_open_repeats(path) + (not _held(path)) for path in _paths(tree))
    if opened > MAX_DEGREE:
        return (f"its search could take time growing as a name's length to the power {opened} (.* after .*, or a "
                f".* searched from every position); at most {MAX_DEGREE}: anchor it with ^ or write one .*")
    return None
