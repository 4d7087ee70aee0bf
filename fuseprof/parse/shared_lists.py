"""An op's recorded lists (input shapes, dtypes, concrete inputs) decoded once per distinct text, not once per op.

Why: a trace repeats a few hundred distinct shape lists over a hundred thousand ops, and decoding every op's
args into Python lists was the decoder's largest cost — 0.59 s of the 131 MB bench trace's 2.2 s, against 0.13 s
for the same ops' ids alone. Read as raw JSON text first (``msgspec.Raw``: a view of the bytes), each distinct
text is decoded once (384 on that trace, for 139,056 ops).

How: ``as_text(kind, fields)`` is the args struct ``kind`` with ``fields`` read as their text; ``decode_sharing``
decodes a batch with it, then each distinct text as ``list | None`` — what the typed field takes — and sets every
struct's field to that value. Ops that recorded the same text share one list: read them, never change them
(nothing in fuseprof does). None when the batch, or one text, does not decode as the typed struct would take it
(a field of another type, a shape written as a string): the caller then decodes the typed way, which keeps its
errors and its field-by-field reading of what the strict decode refuses.
"""

from __future__ import annotations

from typing import Any

import msgspec

_NULL = msgspec.Raw(b"null")  # a field the args leave out: as if written null
_LIST = msgspec.json.Decoder(list[Any] | None)
_UNSEEN = object()


def as_text(kind: type[msgspec.Struct], fields: tuple[str, ...]) -> type[msgspec.Struct]:
    """``kind`` with ``fields`` (each ``list[...] | None`` there) read as their raw JSON text."""
    spec = [(f.name, msgspec.Raw, msgspec.field(default=_NULL, name=f.encode_name)) if f.name in fields else
            (f.name, f.type, msgspec.field(default=f.default, name=f.encode_name)) for f in msgspec.structs.fields(kind)]
    return msgspec.defstruct(f"{kind.__name__}AsText", spec, gc=False)


def decode_sharing(decoder: msgspec.json.Decoder[Any], text: bytes, fields: tuple[str, ...]) -> list[Any] | None:
    """The structs ``decoder`` (of a list of ``as_text`` structs or None) reads from ``text``, each of ``fields``
    decoded once per distinct text and shared (the module docstring); None where the typed decode must decide."""
    try:
        decoded = decoder.decode(text)
    except (RecursionError, msgspec.ValidationError, msgspec.DecodeError):
        return None
    values: dict[bytes, Any] = {}
    for args in decoded:
        if args is None:
            continue
        for name in fields:
            found = getattr(args, name)
            if found is _NULL:  # left out (msgspec gives the default itself)
                setattr(args, name, None)
                continue
            raw = bytes(found)
            value = values.get(raw, _UNSEEN)
            if value is _UNSEEN:
                try:
                    value = values[raw] = _LIST.decode(raw)
                except (RecursionError, msgspec.ValidationError, msgspec.DecodeError):
                    return None
            setattr(args, name, value)
    return decoded  # type: ignore[no-any-return]
