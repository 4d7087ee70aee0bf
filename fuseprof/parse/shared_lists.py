"""An op's recorded lists (input shapes, dtypes, concrete inputs) decoded once per distinct text, not once per op.

Why: a trace repeats a few hundred distinct shape lists over a hundred thousand ops, and decoding every op's
args into Python lists was the decoder's largest cost — 0.59 s of the 131 MB bench trace's 2.2 s, against 0.13 s
for the same ops' ids alone. Read as raw JSON text first (``msgspec.Raw``: a view of the bytes), each distinct
text is decoded once (384 on that trace, for 139,056 ops).

How: ``SharingDecoder`` decodes a batch with the args struct's ``fields`` read as their text, then each distinct
text as the typed field takes it (the field's own type, ``list[Any] | None``) and sets every struct's field to that
value. Ops that recorded the same text share one list: read them, never change them
(nothing in fuseprof does). None when the batch, or one text, does not decode as the typed struct would take it
(a field of another type, a shape written as a string): the caller then decodes the typed way, which keeps its
errors and its field-by-field reading of what the strict decode refuses.
"""

from __future__ import annotations

from typing import Any

import msgspec

_NULL = msgspec.Raw(b"null")  # a field the args leave out: as if written null
_UNSEEN = object()


class SharingDecoder:
    """Decodes a batch of args structs ``kind`` (a JSON list of objects or nulls) with ``fields`` read as text and
    each distinct text decoded once, by the field's own type in ``kind`` (``strict`` as the typed decode's), and
    shared (the module docstring)."""

    def __init__(self, kind: type[msgspec.Struct], fields: tuple[str, ...], strict: bool) -> None:
        listed = [f for f in msgspec.structs.fields(kind) if f.name in fields]
        self._keys = [f'"{f.encode_name}"'.encode() for f in listed]
        self._typed = [(f.name, msgspec.json.Decoder(f.type, strict=strict)) for f in listed]
        spec = [(f.name, msgspec.Raw, msgspec.field(default=_NULL, name=f.encode_name)) if f.name in fields else
                (f.name, f.type, msgspec.field(default=f.default, name=f.encode_name))
                for f in msgspec.structs.fields(kind)]
        as_text = msgspec.defstruct(f"{kind.__name__}AsText", spec, gc=False)
        self._decoder = msgspec.json.Decoder(list[as_text | None], strict=strict)  # type: ignore[valid-type]

    def decode(self, text: bytes) -> list[Any] | None:
        """The structs; None where there is nothing to share (the batch names none of the fields: a kernel's, a
        launch call's) or the typed decode must decide (a field of another type, a list its type refuses,
        nesting past the recursion limit)."""
        if not any(key in text for key in self._keys):
            return None
        try:
            decoded = self._decoder.decode(text)
        except (RecursionError, msgspec.ValidationError, msgspec.DecodeError):
            return None
        plan: list[tuple[str, msgspec.json.Decoder[Any], dict[bytes, Any]]] = [(n, t, {}) for n, t in self._typed]
        for args in decoded:
            if args is None:
                continue
            for name, typed, values in plan:
                found = getattr(args, name)
                if found is _NULL:  # left out (msgspec gives the default itself)
                    setattr(args, name, None)
                    continue
                raw = bytes(found)
                value = values.get(raw, _UNSEEN)
                if value is _UNSEEN:
                    try:
                        value = values[raw] = typed.decode(raw)
                    except (RecursionError, msgspec.ValidationError, msgspec.DecodeError):
                        return None
                setattr(args, name, value)
        return decoded  # type: ignore[no-any-return]
