"""A hashable key for a recorded op's values (its input shapes, dtypes, concrete inputs: nested lists of numbers,
text and nulls), for the memos that work each distinct value out once.

Why not ``repr``: a trace repeats a few dozen distinct shape lists across tens of thousands of ops, and the memos
keyed each op by the ``repr`` of its lists — 86,000 calls and 3% of the analysis of the 131 MB bench trace, for
68 distinct values. msgspec writes the same lists as JSON text about six times faster. JSON text names one value
except where it writes two values alike: None and NaN (and the infinities) are all ``null``, and a tuple is
written as a list is. Text holding ``null`` falls back to ``repr`` (a str key, never equal to a bytes one), as
does a value JSON cannot hold (a NumPy scalar, a string with a lone surrogate). Tuples and lists stay alike: the
decoder and the trace store give every recorded list as a list, so no memo sees both for one value.
"""

from __future__ import annotations

from typing import Any

import msgspec

_ENCODE = msgspec.json.Encoder().encode


def value_key(value: Any) -> bytes | str:
    """``value``'s JSON text where that text is its alone, else its ``repr`` (the module docstring)."""
    try:
        text = _ENCODE(value)
    except (TypeError, UnicodeEncodeError):  # a type JSON has not (a NumPy scalar), text UTF-8 has not (a lone surrogate)
        return repr(value)
    return repr(value) if b"null" in text else text
