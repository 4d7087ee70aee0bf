"""Inductor kernel names read back into the operators they fuse.

torch.compile's Inductor names each Triton kernel it generates ``triton_<kind>_fused_<ops>_<n>``
(``torch._inductor.codegen.triton.TritonScheduling.define_kernel``): ``<kind>`` is the first three letters of
the kernel's category (``poi`` pointwise, ``red`` reduction, ``per`` persistent reduction, ``tem`` a template: a
GEMM or convolution written in Triton with its epilogue, ``for`` foreach), ``<ops>`` the ATen operators whose
nodes it computes, each once, sorted and joined by ``_`` (``get_fused_kernel_name``, ``original_aten``: the
operator before decomposition, so ``addmm`` in a pointwise kernel is the bias add of an ``addmm`` whose product
runs elsewhere), ``<n>`` a counter. The same name reaches the trace twice: as the GPU kernel's name, and, from
torch 2.7 on, as the name of a CPU op around each launch that carries the kernel's tensor arguments and the
``kernel_name``/``kernel_file``/``kernel_hash``/``kernel_kwargs`` arguments (the file is Inductor's cache path on
the capture machine: a trace does not hold it).

Operator names hold underscores themselves (``_unsafe_view``, ``index_copy``, ``split_with_sizes``), so
splitting the name at ``_`` invents operators (``index`` and ``copy``; ``scaled``, ``dot``, ``product``). The
name is read back against torch's own operator names (``fuseprof.model.aten_ops``): among the ways to cut it
into names, the one with fewest pieces that are no operator, then fewest pieces (``index_copy`` rather than
``index`` + ``copy``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from fuseprof.model.aten_ops import OPERATORS

KINDS = {"poi": "pointwise", "red": "reduction", "per": "persistent reduction", "tem": "template",
         "for": "foreach", "mix": "mixed", "unk": "unknown"}
_NAME = re.compile(r"(?:^|_)triton_(?P<kind>[a-z]{3})_(?:fused_?(?P<ops>\w*?))?_?(?P<n>\d+)$")


@dataclass(frozen=True)
class InductorKernel:
    """An Inductor kernel as its name describes it: its ``kind`` (``KINDS``' values), the operators it computes
    (``ops``, as torch names them: ``_unsafe_view``, ``index_copy``) and the pieces of the name no operator name
    matched (``unknown``: an operator newer than the names fuseprof holds, or a name cut short)."""

    kind: str
    ops: tuple[str, ...]
    unknown: tuple[str, ...] = ()

    @property
    def computes(self) -> frozenset[str]:
        """The operators without their leading and trailing underscores, as the fusion patterns' kinds name them
        (``_to_copy`` is ``to_copy``, ``index_copy_`` is ``index_copy``), the unknown pieces too."""
        return frozenset(n.strip("_") for n in (*self.ops, *self.unknown) if n.strip("_"))


def inductor_kernel(name: str) -> InductorKernel | None:
    """The kernel an Inductor kernel's name describes, or None for a name Inductor did not make."""
    match = _NAME.search(name) if isinstance(name, str) and len(name) < 2_000 else None
    if match is None or match.group("kind") not in KINDS:
        return None
    ops, unknown = operators(match.group("ops") or "")
    return InductorKernel(KINDS[match.group("kind")], ops, unknown)


def operators(text: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The operator names ``text`` (operator names joined by ``_``, as Inductor joins them) is made of, and the
    pieces that are none (single words, each its own piece)."""
    pieces = _cut(text) if text.strip("_") else ()
    return (tuple(n for p in pieces if (n := _operator(p)) is not None),
            tuple(p.strip("_") for p in pieces if _operator(p) is None))


def _operator(piece: str) -> str | None:
    """The operator name a piece is, as torch spells it, allowing for the underscores a join or a caller's pattern
    ate (``fused__to_copy`` cut at ``fused_+`` leaves ``to_copy``; an in-place ``index_copy_`` joined to the next
    name leaves ``_mul``); None for a piece that is no operator."""
    bare = piece.strip("_")
    return next((n for n in (piece, bare, "_" + bare, "__" + bare, bare + "_") if n in OPERATORS), None)


def _known(piece: str) -> bool:
    return _operator(piece) is not None


@lru_cache(maxsize=8192)
def _cut(text: str) -> tuple[str, ...]:
    """The best cut of ``text`` at its underscores: fewest pieces that are no operator (an unknown piece is one
    word), then fewest pieces. By dynamic programming from the end, each piece at most as long as the longest
    operator name: linear in the name's length, however many underscores it holds."""
    cuts = [i for i, c in enumerate(text) if c == "_"] + [len(text)]
    best: dict[int, tuple[tuple[int, int], tuple[str, ...]]] = {len(text) + 1: ((0, 0), ())}
    for start in reversed([0] + [c + 1 for c in cuts[:-1]]):
        options = []
        for end in cuts:
            if end <= start or end + 1 not in best:
                continue
            if end - start > _LONGEST:
                break
            piece, rest = text[start:end], best[end + 1]
            known = _known(piece)
            if piece.strip("_") and (known or "_" not in piece.strip("_")):
                options.append(((rest[0][0] + (not known), rest[0][1] + 1), (piece, *rest[1])))
        if options:
            best[start] = min(options, key=lambda o: o[0])
    return best[0][1] if 0 in best else tuple(t for t in text.split("_") if t)


_LONGEST = max(len(n) for n in OPERATORS) + 2
