"""Fusion patterns in the op graph: each fusion of the catalogue found — done or left undone — by the
dataflow between a trace's ops (``fuseprof.analysis.facts.units``), never by an op's name or its distance from
another. Names decide only what a unit *is* (the registry's kinds: ``silu``, ``mul``, ``rms norm``,
``rotary``, ``cache write``; its category: GEMM, attention); what a model *does* is read from the edges:

    add_rmsnorm   a residual add (two tensors of one size) whose output is an RMSNorm's input (a norm op,
                  or pow → mean → rsqrt); fused: one unit that adds two such tensors and normalises
    silu_mul      a SiLU whose output a product of two tensors of one size reads; fused: one unit doing both
    gate_up       two GEMMs whose outputs meet in a product of two tensors of one size, one side through an
                  activation (act(x·W₁) · x·W₂); fused: one GEMM feeding both sides (its width twice the
                  product's), or a gated activation fed by one GEMM of twice its width
    qkv           the GEMMs an attention's q, k and v come from (walking up through RoPE, norms, copies):
                  one for all → fused, one each → not fused; where the edges do not reach (a replay's
                  views), the widths: a GEMM between the last attention and this one as wide as q + 2·kv
                  (kv dividing q: grouped-query attention) whose output reaches the attention, where
                  the graph links it at all, is fused; several as wide as q or a divisor of it reading
                  activations of one shape are not (an eager attention's q width: what its output
                  projection reads)
    attention     an attention unit (SDPA, flash, cuDNN) is fused; a softmax whose input comes from a
                  batched GEMM (QKᵀ, through mask and scale) and whose output reaches a batched GEMM (·V)
                  is eager attention, at any distance
    epilogue      a GEMM's output read by an activation alone, or by an add of a bias (a tensor as wide as
                  the GEMM's output with no more rows than 1), is an epilogue left out; a GEMM that adds
                  its bias itself (``gemm epilogue``) is one done
    rope_cache    a neg whose output a cat reads (rotate-half) is RoPE unfused; a unit computing
                  ``rotary`` (or neg and cat together) is RoPE fused, and fused with the KV-cache write
                  when it also writes the cache, partly when a cache write runs apart
    dequant_gemm  a GEMM that reads quantized operands (``quantized gemm``)
    sampling      an argmax, top-k or multinomial over a tensor as wide as the widest GEMM of the trace
                  (its logits: a router's top-k over 8 experts, CLIP's argmax over token ids are not), or,
                  where the GEMMs' widths are not recorded (a replay), a cast or copy between the GEMM launched
                  just before an argmax and the argmax (a lone argmax is the whole sampler);
                  fused: a unit computing ``fused sampling``
    optimizer     the units inside the entry's region (``Optimizer.step#``): a ``fused optimizer`` unit
                  is fused, elementwise and foreach units with none are not
    chain         a user's entry: a unit computing the entry's first kind feeding (through casts) one
                  computing the next, and so on; fused: one unit computing them all
    kernels       a user's entry: units whose op or kernel matches its ``fused`` regex

A unit whose tensors the trace does not record — a kernel of a compiled region or of a graph replay, which only
its name describes — is linked to nothing; for it the patterns read the one dataflow such a trace keeps, the
launch order: kernels alone read what the kernel launched before them wrote (``Units``), a pair of tensors is
taken to be one where none is recorded, and the GEMM calls launched since the last norm, reduction or attention
before them (``Units.launched_around``; the norms of q and k between them and the attention passed) before an
attention are its q, k and v projections (one: fused; three: not), before
a gated product its gate and up (one: fused; two: not); an activation-only kernel launched right after a GEMM,
with no product after it, is its epilogue left out.

Each finding is one instance (``Found``) with its units, a signature to group by, and the predicted
saving: memory-bound groups as the bytes entering and leaving the group at the copy model's rate (the
fusion finder's model), sibling GEMMs as one GEMM of the summed width (input read once), eager attention
as the flash kernel's FLOPs or bytes, an epilogue as the unit that disappears.
"""

from __future__ import annotations

import math
import re
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache, partial

from fuseprof.analysis.facts.units import Unit, Units
from fuseprof.analysis.judgements.fusion import CopyModel
from fuseprof.model.registry import ANCHOR_CATEGORIES, CatalogueEntry, Registry
from fuseprof.model.roofline import Roof
from fuseprof.parse.names import short_kernel_name


@dataclass(frozen=True)
class Found:
    """One instance of a fusion, done (``fused``) or not (``unfused``), with the units it spans."""

    fused: bool
    units: tuple[Unit, ...]
    signature: str
    saving_ns: float = float("nan")
    fused_bytes: float = float("nan")  # what the fused kernel would move, where the pattern's model says


@dataclass
class Costs:
    """What a pattern predicts savings with: the roof, the copy model, the registry's cost models."""

    roof: Roof
    copy: CopyModel
    registry: Registry
    _estimates: dict[int, tuple[float, float, str] | None] = field(default_factory=dict)

    def estimate(self, unit: Unit) -> tuple[float, float, str] | None:
        if unit.op_id not in self._estimates:
            est = self.registry.estimate(unit.op, *unit.inputs) if unit.op else None
            self._estimates[unit.op_id] = (est.flops, est.bytes, est.pipe) if est else None
        return self._estimates[unit.op_id]

    def time_ns(self, flops: float, nbytes: float, pipe: str) -> float:
        peak = self.roof.peak(pipe)
        compute = flops / peak * 1e9 if peak and not math.isnan(peak) else 0.0
        return max(compute, nbytes / self.roof.dram_bytes_per_s * 1e9) + self.copy.fixed_ns


def _anchor(unit: Unit) -> bool:
    return unit.category in ANCHOR_CATEGORIES


def _not_anchor(unit: Unit) -> bool:
    return not _anchor(unit)


def _computes(unit: Unit, kind: str) -> bool:
    return unit.computes(kind)


def _copy(unit: Unit) -> bool:
    return unit.category == "copy/cast"


_SPLIT_K = re.compile(r"splitK_?reduce", re.IGNORECASE)  # cuBLAS(Lt)'s second kernel of one split-K GEMM call
_BACKWARD_KERNEL = re.compile(r"bwd|backward", re.IGNORECASE)
# what an activation kernel after a GEMM may compute beside the activation and stay an epilogue: views, casts and
# the bias add (Inductor's kernel after an extern mm lists the addmm whose bias it adds)
_EPILOGUE_KINDS = frozenset({"activation", "view", "unsafe_view", "reshape", "to_copy", "clone", "add", "addmm",
                             "t", "permute", "transpose", "expand", "squeeze", "unsqueeze"})


def _name(unit: Unit) -> str:
    """The op, else the kernel's short name with what it computes (``vectorized_elementwise_kernel [silu]``)."""
    if unit.op:
        return unit.op
    kinds = sorted(unit.kinds - {"activation", "sample", "compiled region"})
    short = short_kernel_name(unit.kernel)
    return f"{short} [{', '.join(kinds)}]" if kinds and not short.startswith("triton_") else short


def _unlinked(unit: Unit) -> bool:
    """The trace records no tensors of it (a kernel alone, or an op without shapes): no edge can reach it."""
    return not unit.tensors()


def _layer_boundary(unit: Unit) -> bool:
    """A unit that starts what a layer's projections read (a norm, a reduction) or ends the previous attention."""
    return unit.category in ("normalization", "reduction", "attention") or unit.computes("rms norm")


def _gemm_calls(found: list[Unit]) -> list[Unit]:
    """The GEMM calls among launched units, in launch order (a split-K GEMM's reduction kernel is the same call)."""
    return sorted((u for u in found if u.is_gemm and not u.batched and not _SPLIT_K.search(u.kernel)),
                  key=lambda u: u.order)


def _gated_pair(units: Units, unit: Unit, before: bool) -> Unit | None:
    """For a unit alone: the other half of an activation · product pair by launch order, only GEMM calls and copies
    launched between (``silu(gate(x)) * up(x)`` runs gate, silu, up, mul) — the product after an activation, or
    (``before``) the gated MLP's activation (SiLU, GELU) before a product; None where something else runs first."""
    for other in units.launched_around(unit, lambda u: False, before=before, limit=4):
        if before and (other.computes("silu") or other.computes("gelu")) and not other.computes("mul"):
            return other
        if not before and other.computes("mul") and not other.computes("activation"):
            return other
        if not (other.is_gemm or _copy(other)):
            return None
    return None


def _epilogue_only(unit: Unit, activations: frozenset[str]) -> bool:
    """An elementwise unit computing an activation and nothing but views, casts and a bias add beside it."""
    return unit.category == "elementwise" and unit.computes("activation") and not unit.computes("mul") \
        and unit.kinds <= _EPILOGUE_KINDS | activations


def _numel(unit: Unit, position: int) -> int:
    value = unit.args[position] if position < len(unit.args) else None
    return math.prod(value.dims) if value is not None else 0


def _same_size_pair(unit: Unit) -> bool:
    """Two tensor arguments of one element count (more than one element): a product or sum of two
    activations, not a tensor and a scalar, bias or scale."""
    sizes = [math.prod(v.dims) for _, v in unit.tensors()]
    return any(sizes.count(n) >= 2 for n in set(sizes) if n > 1)


def _memory_saving(group: list[Unit], units: Units, costs: Costs) -> float:
    """The group's time minus one kernel moving only the bytes that enter the group (arguments no unit of it
    produced) and leave it (outputs no unit of it reads), at the copy model's rate."""
    members = {u.op_id for u in group}
    moved = 0
    for unit in group:
        inside = units.producer_ids(unit.op_id) & members
        for position, value in unit.tensors():
            if not units.producer_ids(unit.op_id, position) & inside:
                moved += value.nbytes
        if not any(c.op_id in members for c in units.consumers(unit.op_id)):
            moved += sum(v.nbytes for v in unit.outputs)
    if not moved:
        return float("nan")
    return max(0.0, sum(u.time_ns for u in group) - float(costs.copy.time_ns(moved)))


def sibling_cost(gemms: list[Unit], costs: Costs) -> tuple[float, float]:
    """Sibling GEMMs as one of the summed width — the input read once, weights and outputs as before: its
    predicted time and bytes (NaN without shapes)."""
    found = [costs.estimate(g) for g in gemms]
    activation = gemms[0].operand("activation")
    if None in found or activation is None:
        return float("nan"), float("nan")
    flops = sum(f[0] for f in found if f)
    nbytes = sum(f[1] for f in found if f) - (len(gemms) - 1) * activation.nbytes
    return costs.time_ns(flops, nbytes, found[0][2] if found[0] else "memory"), float(nbytes)


def sibling_saving(gemms: list[Unit], costs: Costs) -> float:
    predicted, _ = sibling_cost(gemms, costs)
    return max(0.0, sum(g.time_ns for g in gemms) - predicted) if predicted == predicted else float("nan")


def _shape(value: object) -> str:
    return str(list(value.dims)) if value is not None and hasattr(value, "dims") else "?"


# --- the patterns


def add_rmsnorm(units: Units, entry: CatalogueEntry, costs: Costs) -> list[Found]:
    found = []
    for unit in units.computing("rms norm", "pow"):
        # with shapes, the add must be of two activations (a norm's own + eps is not a residual add); a trace
        # without shapes leaves the unit's kinds to say it
        if unit.computes("rms norm") and unit.computes("add") and (_same_size_pair(unit) or not unit.tensors()):
            found.append(Found(True, (unit,), f"{unit.op or unit.kernel} (add and norm in one)"))
            continue
        norm_input = None
        if unit.computes("rms norm") and not unit.computes("add"):
            norm_input, chain = 0, [unit]
        elif unit.computes("pow") and not unit.computes("rms norm") and units.reaches(
                unit.op_id, lambda u: u.computes("rsqrt"), lambda u: u.computes("mean") or u.computes("add") or _copy(u),
                depth=4):
            norm_input, chain = 0, [unit, *_norm_chain(unit, units)]
        if norm_input is None:
            continue
        adds, _ = units.sources(unit.op_id, norm_input, _copy, depth=3)
        residual = [a for a in adds if a.computes("add") and not a.computes("rms norm")
                    and (_same_size_pair(a) or _unlinked(a))]
        for add in residual[:1]:
            group = [add, *chain]
            found.append(Found(False, tuple(group), f"{_name(add)} → {' → '.join(_name(u) for u in chain[:4])} …",
                               _memory_saving(group, units, costs)))
    return found


def _norm_chain(first: Unit, units: Units) -> list[Unit]:
    """The decomposed norm's units after its pow: down through elementwise and reductions to the last
    one before an anchor (the norm's output feeds a GEMM)."""
    chain, frontier, seen = [], [first], {first.op_id}
    for _ in range(8):
        step = []
        for unit in frontier:
            for nxt in units.consumers(unit.op_id):
                if nxt.op_id not in seen and _not_anchor(nxt) and nxt.category != "normalization":
                    seen.add(nxt.op_id)
                    chain.append(nxt)
                    step.append(nxt)
        frontier = step
    return chain


def silu_mul(units: Units, entry: CatalogueEntry, costs: Costs) -> list[Found]:
    found = []
    for unit in units.computing("silu"):
        if unit.computes("silu", "mul"):
            found.append(Found(True, (unit,), f"{unit.op or unit.kernel} (SiLU and product in one)"))
        elif unit.computes("silu"):
            products = units.reaches(unit.op_id, lambda u: u.computes("mul") and not u.computes("silu")
                                     and (_same_size_pair(u) or _unlinked(u)), _copy, depth=3)
            if not products and _unlinked(unit) and (after := _gated_pair(units, unit, before=False)) is not None:
                products = [after]
            for product in products[:1]:
                group = [unit, product]
                found.append(Found(False, tuple(group), f"{_name(unit)} → {_name(product)}",
                                   _memory_saving(group, units, costs)))
    return found


def _gemm_sources(units: Units, unit: Unit, position: int) -> tuple[list[Unit], bool]:
    """The non-batched GEMMs an argument comes from (walking up through anything but anchors) and whether
    an activation was passed on the way."""
    sources, passed = units.sources(unit.op_id, position, _not_anchor, depth=8)
    gemms = [s for s in sources if s.is_gemm and not s.batched]
    return gemms, any(p.computes("activation") for p in passed)


def gate_up(units: Units, entry: CatalogueEntry, costs: Costs) -> list[Found]:
    found = []
    for unit in units.computing("mul", forward=True):  # each case below computes a product
        if unit.is_gemm and unit.computes("activation", "mul"):  # a GEMM with a gated-activation epilogue
            found.append(Found(True, (unit,), f"{unit.op or unit.kernel} (gate, up and activation in one GEMM)"))
            continue
        if _unlinked(unit) and unit.computes("gated activation"):  # its family reads gate and up as one tensor
            found.append(Found(True, (unit,), f"{_name(unit)} (a gated activation: gate and up from one GEMM)"))
            continue
        if _unlinked(unit) and not _anchor(unit) and (unit.computes("activation", "mul")
                                                      or _gated_pair(units, unit, before=True) is not None):
            found += _gate_up_by_order(units, unit)
            continue
        gated = unit.computes("activation", "mul")
        if not (gated or (unit.computes("mul") and _same_size_pair(unit))) or _anchor(unit):
            continue
        every_side = [(position, _gemm_sources(units, unit, position)) for position, _ in unit.tensors()]
        sides = [(gemms, act) for _, (gemms, act) in every_side if gemms]
        unlinked = [p for p, (gemms, _) in every_side if not gemms and not units.producers(unit.op_id, p)]
        # each side one GEMM (a side fed by several GEMMs is some other product), one side through an activation
        if not sides or any(len(gemms) != 1 for gemms, _ in sides) or not (gated or any(act for _, act in sides)):
            continue
        ends = list({gemms[0].op_id: gemms[0] for gemms, _ in sides}.values())
        # a gated activation's product is as wide as its narrowest tensor (the input holds both halves)
        width = min((v.dims[-1] for _, v in unit.tensors() if v.dims), default=0) if gated else unit.width or 0
        if len(ends) == 1:
            (gemm,) = ends
            if width and gemm.width == 2 * width:
                found.append(Found(True, (gemm, unit), f"{gemm.op} [N = 2 × {width}] → {unit.op or unit.kernel}"))
            elif gated and len(unlinked) == 1 and (twin := _twin_gemm(units, gemm, unit)) is not None:
                ends = [gemm, twin]  # the other side is linked to nothing: compiled code reads it through a view
            else:
                continue
        pair = sorted(ends, key=lambda g: g.order)
        if len(pair) == 2 and units.same_input(*pair):
            found.append(Found(False, (*pair, unit), f"{pair[0].op} + {pair[1].op} → {unit.op or unit.kernel} "
                               f"(same input {_shape(pair[0].operand('activation'))})", sibling_saving(pair, costs)))
    return found


def _gate_up_by_order(units: Units, product: Unit) -> list[Found]:
    """A gated product linked to nothing: the GEMM calls launched since the norm before it (module docstring)."""
    gemms = _gemm_calls(units.launched_around(product, _layer_boundary))
    if len(gemms) == 1:
        return [Found(True, (gemms[0], product), f"{_name(gemms[0])} → {_name(product)} (gate and up in one GEMM, "
                                                 "by launch order)")]
    if len(gemms) == 2:
        return [Found(False, (*gemms, product), f"{_name(gemms[0])} + {_name(gemms[1])} → {_name(product)} (gate and "
                                                "up apart, by launch order)")]
    return []


def _twin_gemm(units: Units, gemm: Unit, gated: Unit) -> Unit | None:
    """For a gated product one of whose sides the graph links to nothing (a view the trace does not record, as
    compiled code reads a GEMM's output): the GEMM just before it, other than ``gemm``, as wide as it and reading
    the same input — the other half of a gate / up pair. None unless exactly one."""
    near = units.between(gemm.order - 4, gated.order)
    twins = [g for g in near if g.is_gemm and not g.batched and g.op_id != gemm.op_id and g.width == gemm.width
             and units.same_input(g, gemm)]
    return twins[0] if len(twins) == 1 else None


@dataclass(frozen=True)
class _Site:
    """An attention: the unit(s), and where its q, k and v are (unit, argument)."""

    units: tuple[Unit, ...]
    q: tuple[Unit, int] | None  # None: an attention linked to nothing (its q, k and v by launch order)
    k: tuple[Unit, int] | None
    v: tuple[Unit, int] | None
    q_width: int | None
    fused: bool


def _q_width(unit: Unit, costs: Costs) -> int | None:
    """Heads × head size of an attention's q: [T, H, D], or 4-D in the op's layout (its cost model's)."""
    tensors = unit.tensors()
    if not tensors:
        return None
    dims = tensors[0][1].dims
    if len(dims) == 3:
        return dims[1] * dims[2]
    if len(dims) == 4:
        family = costs.registry.cost_family(unit.op) if unit.op else None
        layout = getattr(family.cost, "layout", "BHLD") if family is not None else "BHLD"
        return dims[1] * dims[3] if layout == "BHLD" else dims[2] * dims[3]
    return None


def _eager_sites(units: Units) -> list[tuple[Unit, Unit, Unit, list[Unit]]]:
    """(QKᵀ, softmax, ·V, the other units between them: scale, mask, dropout, casts) of each eager attention."""
    sites = []
    for unit in units.computing("softmax"):
        if _anchor(unit) or unit.computes("backward"):
            continue
        before, _ = units.sources(unit.op_id, 0, _not_anchor, depth=6)
        scores = [b for b in before if b.batched]
        after = units.reaches(unit.op_id, lambda u: u.batched, _not_anchor, depth=6)
        if scores and after:
            _, between = units.sources(after[0].op_id, 0, _not_anchor, depth=8)  # all that feeds ·V's probabilities
            inner = [u for u in between if u is not unit]
            inner += _layout_copies(units, scores[0], after[0], {scores[0].op_id, after[0].op_id, unit.op_id,
                                                                 *(u.op_id for u in inner)})
            sites.append((scores[0], unit, after[0], sorted(inner, key=lambda u: u.order)))
    return sites


def _layout_copies(units: Units, qk: Unit, pv: Unit, site: set[int]) -> list[Unit]:
    """The copies that only lay tensors out for an eager attention's batched GEMMs — q and kᵀ made contiguous
    for QKᵀ, v for ·V, ·V's output made contiguous when nothing else reads it: SDPA reads the strided tensors and
    writes its output once, so they go with the chain."""
    feeding = [p for op_id, argument in ((qk.op_id, 0), (qk.op_id, 1), (pv.op_id, 1))
               for p in units.producers(op_id, argument)]
    candidates = [p for p in feeding if p.computes("copy") and p.op_id not in site]
    within = site | {c.op_id for c in candidates}  # a copy read by another of the site's copies is still the site's
    copies = [c for c in candidates if all(r.op_id in within for r in units.consumers(c.op_id))]
    readers = units.consumers(pv.op_id)
    if len(readers) == 1 and readers[0].computes("copy") and readers[0].op_id not in site:
        copies.append(readers[0])
    return list({u.op_id: u for u in copies}.values())


def _attention_sites(units: Units, costs: Costs) -> list[_Site]:
    sites = []
    for unit in units:
        if unit.category == "attention" and _unlinked(unit) and not unit.computes("backward") \
                and not _BACKWARD_KERNEL.search(unit.kernel):
            sites.append(_Site((unit,), None, None, None, None, True))
        if unit.category == "attention" and unit.tensors() and not unit.computes("backward"):
            positions = [p for p, _ in unit.tensors()]
            q_arg, k_arg = (unit.args[positions[0]], unit.args[positions[1]]) if len(positions) >= 3 else (None, None)
            qkv = q_arg is not None and k_arg is not None and len(q_arg.dims) == len(k_arg.dims) == 4
            sites.append(_Site((unit,), (unit, positions[0]), (unit, positions[1]) if qkv else None,
                               (unit, positions[2]) if qkv else None, _q_width(unit, costs), True))
    for qk, softmax, pv, between in _eager_sites(units):
        # heads × head size: what the output projection reads (its K)
        out = units.reaches(pv.op_id, lambda u: u.is_gemm and not u.batched, _not_anchor, depth=6)
        activation = out[0].operand("activation") if out else None
        sites.append(_Site((qk, *sorted([*between, softmax], key=lambda u: u.order), pv), (qk, 0), (qk, 1), (pv, 1),
                           activation.dims[-1] if activation is not None and activation.dims else None, False))
    return sorted(sites, key=lambda s: s.units[0].order)


def attention(units: Units, entry: CatalogueEntry, costs: Costs) -> list[Found]:
    found = []
    for site in _attention_sites(units, costs):
        if site.fused:
            found.append(Found(True, site.units, f"{site.units[0].op or site.units[0].kernel}"))
            continue
        qk, pv = site.units[0], site.units[-1]
        q, k, v = qk.args[0], qk.args[1], pv.args[1] if len(pv.args) > 1 else None
        saving, nbytes = float("nan"), float("nan")
        estimates = [costs.estimate(qk), costs.estimate(pv)]
        if q is not None and k is not None and v is not None and None not in estimates:
            out = math.prod(q.dims[:-1]) * v.dims[-1] * (q.nbytes // max(1, math.prod(q.dims)))
            nbytes = float(q.nbytes + k.nbytes + v.nbytes + out)
            flops = sum(e[0] for e in estimates if e)
            pipe = estimates[0][2] if estimates[0] is not None else "fp32"
            saving = sum(u.time_ns for u in site.units) - costs.time_ns(flops, nbytes, pipe)
        found.append(Found(False, site.units, " → ".join(u.op for u in site.units[:3]) + " … (eager attention)",
                           saving, nbytes))
    return found


def qkv(units: Units, entry: CatalogueEntry, costs: Costs) -> list[Found]:
    found: list[Found] = []
    sites = _attention_sites(units, costs)
    previous_order = -1
    for site in sites:
        gemms: list[Unit | None] = []
        for where in (site.q, site.k, site.v):
            if where is None:
                gemms.append(None)
                continue
            sources, _ = _gemm_sources(units, *where)
            gemms.append(sources[0] if len(sources) == 1 else None)
        start = site.units[0].order
        fed = [_numel(*where) if where is not None else 0 for where in (site.q, site.k, site.v)]
        if all(g is not None for g in gemms) and _consistent(gemms, fed):
            distinct = {g.op_id: g for g in gemms if g is not None}
            if len(distinct) == 1:
                (gemm,) = distinct.values()
                found.append(Found(True, (gemm,), f"{gemm.op} [N = {gemm.width}] → q, k, v"))
            elif len(distinct) == 3:
                ordered = sorted(distinct.values(), key=lambda g: g.order)
                found.append(Found(False, tuple(ordered), " + ".join(g.op for g in ordered) + " → q, k, v",
                                   sibling_saving(ordered, costs)))
            else:
                found.append(Found(True, tuple(distinct.values()), "q apart, k and v in one GEMM"))
        elif site.q_width:
            found += _qkv_by_width(units, site, previous_order, start, costs)
        elif site.q is None:
            found += _qkv_by_order(units, site.units[0])
        previous_order = start
    return found


def _qkv_by_order(units: Units, attention: Unit) -> list[Found]:
    """An attention linked to nothing: the GEMM calls launched since the norm before them (module docstring). The
    walk up passes the norms between the projections and the attention (Qwen3's and OLMo2's per-head q and k norms,
    launched after the QKV GEMM) until it has met a GEMM; the previous attention ends it."""
    walked = units.launched_around(attention, lambda u: u.category == "attention")
    first = next((k for k, u in enumerate(walked) if u.is_gemm), len(walked))
    rest = walked[first:]
    gemms = _gemm_calls(rest[:next((k for k, u in enumerate(rest) if _layer_boundary(u)), len(rest))])
    names = " + ".join(_name(g) for g in gemms)
    if len(gemms) == 1:
        return [Found(True, tuple(gemms), f"{names} → attention (q, k and v in one GEMM, by launch order)")]
    if len(gemms) == 2:
        return [Found(True, tuple(gemms), f"{names} → attention (q apart, k and v in one GEMM, by launch order)")]
    if len(gemms) == 3:
        return [Found(False, tuple(gemms), f"{names} → attention (by launch order)")]
    return []


def _consistent(gemms: list[Unit | None], fed: list[int]) -> bool:
    """Whether the GEMMs found for q, k and v can be theirs (by shapes, tensors of one shape are easily taken
    for one another): a GEMM feeding several of them holds more than any one; a GEMM of q's alone holds as
    much as q (k and v may be read expanded: grouped-query attention)."""
    outputs = [math.prod(g.outputs[0].dims) if g is not None and g.outputs else 0 for g in gemms]
    for i, gemm in enumerate(gemms):
        shared = [j for j, other in enumerate(gemms) if other is gemm]
        if len(shared) > 1 and outputs[i] <= max(fed[j] for j in shared):
            return False
        if len(shared) == 1 and i == 0 and outputs[0] != fed[0]:
            return False
    return True


def _qkv_by_width(units: Units, site: _Site, after: int, before: int, costs: Costs) -> list[Found]:
    """The widths rule of the module docstring, for an attention whose q, k, v the edges do not reach."""
    width = site.q_width or 0
    gemms = [u for u in units.between(after, before) if u.is_gemm and not u.batched and u.width]
    attention = site.units[0]
    # the attention's q, k, v linked to nothing (compiled code computes them in kernels whose outputs the trace
    # does not record): whether a GEMM reaches it cannot be seen, so its place and width decide alone
    unlinked = not any(units.producers(where[0].op_id, where[1]) for where in (site.q, site.k, site.v) if where)
    for gemm in gemms:
        extra = (gemm.width or 0) - width
        # as wide as q + 2·kv, and its output reaches this attention (where the graph links it anywhere): the
        # widths first, since the walk down the graph costs more and most GEMMs fail the widths
        if extra > 0 and extra % 2 == 0 and width % (extra // 2) == 0 and (
                unlinked or not units.consumers(gemm.op_id) or
                attention in units.reaches(gemm.op_id, lambda u: u is attention, _not_anchor, depth=8)):
            return [Found(True, (gemm,), f"{gemm.op} [N = {gemm.width} = {width} + 2 × {extra // 2}] → attention")]
    narrow = [g for g in gemms if g.width and g.width <= width and width % g.width == 0]
    by_input: dict[str, list[Unit]] = {}
    for gemm in narrow:
        by_input.setdefault(_shape(gemm.operand("activation")), []).append(gemm)
    siblings = max(by_input.values(), key=len, default=[])
    if len(siblings) >= 2:
        return [Found(False, tuple(siblings[-3:]), " + ".join(g.op for g in siblings[-3:]) + " → attention (by width)",
                      sibling_saving(siblings[-3:], costs))]
    # no GEMM before it has a width (a graph replay's, run without its capture: no op, no shapes), nor an edge to
    # it: launch order decides, as for an attention linked to nothing (vLLM's piecewise graphs run it eagerly)
    return _qkv_by_order(units, attention) if unlinked and not gemms else []


def epilogue(units: Units, entry: CatalogueEntry, costs: Costs) -> list[Found]:
    """A GEMM that adds its bias itself (``gemm epilogue``: ``addmm``) or that the entry's ``fused`` names is an
    epilogue done; a GEMM whose output an activation or a bias add reads apart is one left out (``addmm``'s ReLU
    run as a ``clamp_min`` kernel after it: the bias done, the activation apart — partly fused)."""
    found = []
    extra = re.compile(entry.fused, re.IGNORECASE) if entry.fused else None
    activations = next((frozenset(r.any_of) for r in costs.registry.kind_rules if r.kind == "activation"), frozenset())
    for unit in units:
        if not unit.is_gemm or unit.batched:
            continue
        if unit.computes("gemm epilogue") or (extra is not None and (extra.search(unit.kernel) or extra.search(unit.op))):
            found.append(Found(True, (unit,), f"{unit.op or unit.kernel} (epilogue in the GEMM)"))
        apart = []
        for consumer in units.consumers(unit.op_id):
            if _anchor(consumer) or consumer.category not in ("elementwise",):
                continue
            tensors = consumer.tensors()
            if not tensors:  # linked by launch order: an activation alone, not one side of a gated product
                if _epilogue_only(consumer, activations) and _gated_pair(units, consumer, before=False) is None:
                    apart.append(Found(False, (unit, consumer), f"{_name(unit)} → {_name(consumer)} (epilogue, by "
                                                                "launch order)", float(consumer.time_ns)))
                continue
            activation = consumer.computes("activation") and not consumer.computes("mul") and (
                len(tensors) == 1 or (len(tensors) == 2 and _epilogue_only(consumer, activations)
                                      and _is_bias(consumer, unit)))
            bias = consumer.computes("add") and len(tensors) == 2 and _is_bias(consumer, unit)
            if activation or bias:
                apart.append(Found(False, (unit, consumer), f"{_name(unit)} → {_name(consumer)} (epilogue)",
                                   float(consumer.time_ns)))
        if not apart and not units.consumers(unit.op_id):  # linked to nothing: the kernel launched right after it
            following = units.launched_around(unit, lambda u: False, before=False, limit=3)
            nxt = next((u for u in following if not _SPLIT_K.search(u.kernel)), None)
            if nxt is not None and not units.producers(nxt.op_id) and _epilogue_only(nxt, activations):
                apart.append(Found(False, (unit, nxt), f"{_name(unit)} → {_name(nxt)} (epilogue, by launch order)",
                                   float(nxt.time_ns)))
        found += apart
    return found


def _is_bias(add: Unit, gemm: Unit) -> bool:
    """One argument as large as the GEMM's output, the other as wide but with at most one row."""
    values = sorted((v for _, v in add.tensors()), key=lambda v: math.prod(v.dims))
    small, large = values[0], values[-1]
    return bool(gemm.width) and small.dims[-1] == gemm.width and math.prod(small.dims[:-1] or (1,)) == 1 \
        and math.prod(large.dims) > math.prod(small.dims)


def _writes_cache(unit: Unit) -> bool:
    return unit.computes("cache write") or unit.computes("index_put") or unit.computes("index_copy")


def rope_cache(units: Units, entry: CatalogueEntry, costs: Costs) -> list[Found]:
    """RoPE done apart (rotate-half: a neg whose output a cat reads) is not fused. A unit doing RoPE in one (``rotary``,
    or neg and cat together) is the fusion done where it also writes the KV cache; where none does, it is done with
    the cache write left apart when a cache is written (partly), and no instance at all when none is (a model with
    no KV cache — training, a diffusion transformer — has no RoPE + cache write to fuse). A cache write apart
    beside a RoPE unit that writes the cache is v's (v takes no RoPE)."""
    found = []
    rope = [u for u in units.computing("rotary", "neg") if u.computes("rotary") or u.computes("neg", "cat")]
    in_rope = {u.op_id for u in rope}
    for unit in units.computing("neg"):
        if unit.op_id not in in_rope:
            for cat in units.reaches(unit.op_id, lambda u: u.computes("cat"), _copy, depth=2)[:1]:
                group = [unit, cat, *(u for u in units.consumers(cat.op_id) if u.category == "elementwise")]
                found.append(Found(False, tuple(group), f"{_name(unit)} → {_name(cat)} (rotate half)",
                                   _memory_saving(group, units, costs)))
    apart = [w for w in units.computing("cache write", "index_put", "index_copy") if w.op_id not in in_rope]
    if any(_writes_cache(u) for u in rope) or apart:
        found += [Found(True, (u,), f"{_name(u)} (RoPE in one{' with the cache write' if _writes_cache(u) else ''})")
                  for u in rope]
    if rope and apart and not any(_writes_cache(u) for u in rope):
        found += [Found(False, (w,), f"{_name(w)} (the KV-cache write apart)", float("nan")) for w in apart]
    return found


def dequant_gemm(units: Units, entry: CatalogueEntry, costs: Costs) -> list[Found]:
    return [Found(True, (u,), f"{u.op or u.kernel} (quantized operands in the GEMM)")
            for u in units.computing("quantized gemm")]


def sampling(units: Units, entry: CatalogueEntry, costs: Costs) -> list[Found]:
    widths = [u.width for u in units if u.is_gemm and not u.batched and u.width]
    widest = max(widths, default=0)
    found = []
    for unit in units.computing("fused sampling", "sample"):
        if unit.computes("fused sampling"):
            found.append(Found(True, (unit,), f"{unit.op or unit.kernel} (sampling in one)"))
        elif unit.computes("sample") and unit.tensors() and widest and unit.tensors()[0][1].dims[-1] == widest:
            _, passed = units.sources(unit.op_id, unit.tensors()[0][0], _not_anchor, depth=4)
            group = [*sorted(passed, key=lambda u: u.order), unit]
            found.append(Found(False, tuple(group), " → ".join(u.op for u in group) + f" (over logits of {widest})",
                               _memory_saving(group, units, costs) if len(group) > 1 else float("nan")))
        elif unit.computes("sample") and (chain := _after_logits_gemm(units, unit)):
            found.append(Found(False, (*chain, unit), " → ".join(_name(u) for u in (*chain, unit)) + " (after the "
                               "LM head's GEMM, by launch order)", float("nan")))
    return found


def _after_logits_gemm(units: Units, sample: Unit) -> tuple[Unit, ...]:
    """What runs between the LM head's GEMM and an argmax or top-k over its logits (a cast, a copy, a softmax),
    where that GEMM's width is not recorded (a graph replay's, a compiled region's kernel: the widths cannot be
    compared) — read by launch order: the GEMM launched within a few kernels before the sampler. Empty where the
    sampler follows the GEMM directly (one argmax is the whole sampler: nothing to fuse) or no GEMM is near."""
    nearest = units.launched_around(sample, lambda u: u.computes("sample"), limit=4)
    at = next((i for i, u in enumerate(nearest) if u.is_gemm), None)
    if at is None or nearest[at].width:
        return ()
    return tuple(reversed(nearest[:at]))


def optimizer(units: Units, entry: CatalogueEntry, costs: Costs) -> list[Found]:
    region = re.compile(entry.region) if entry.region else None
    inside = [u for u in units if _in_region(u, region)]
    fused = [u for u in inside if u.computes("fused optimizer")] if inside else units.computing("fused optimizer")
    if fused:
        return [Found(True, tuple(fused), f"{fused[0].op or fused[0].kernel} ×{len(fused)}")]
    work = [u for u in inside if u.category == "elementwise"]
    if not work:
        return []
    return [Found(False, tuple(work), f"{len(work)} elementwise and foreach ops in {entry.region.strip('^')}",
                  float("nan"))]


_TRAINING_PASSES = ("forward", "backward", "recomputation")


def _in_region(unit: Unit, region: re.Pattern[str] | None) -> bool:
    return region is not None and _ranges_in(unit.ranges, region)


@lru_cache(maxsize=4096)
def _ranges_in(ranges: str, region: re.Pattern[str]) -> bool:
    """Whether one of the ranges (outermost first, joined by ' / ') matches ``region``: asked once per distinct
    ranges text, not per unit (a trace repeats a few range paths over tens of thousands of units)."""
    return any(region.search(part) for part in ranges.split(" / "))


def _runs(units: Units, member: Callable[[Unit], bool]) -> list[list[Unit]]:
    """The runs of consecutive units (in order) for which ``member`` holds: one per step of a loop."""
    runs: list[list[Unit]] = []
    last = False
    for unit in units:
        now = member(unit)
        if now and not last:
            runs.append([])
        if now:
            runs[-1].append(unit)
        last = now
    return runs


def clip(units: Units, entry: CatalogueEntry, costs: Costs) -> list[Found]:
    """Gradient clipping: from a norm outside any module after the backward pass up to the optimizer step (the
    entry's region), the norms and the scales (the few scalar ops between stay in either form; the grad scaler's
    and communication are not clipping). A multi-tensor norm (``_foreach_norm``) is clipping
    done in one pass; a norm per gradient (and the total over their stack) is not: fused, it reads the gradients
    once for the norms and once more to scale them in place — 3 × their bytes at the copy rate, two kernels."""
    region = re.compile(entry.region) if entry.region else None
    groups: list[list[Unit]] = []
    current: list[Unit] | None = None
    for unit in units:
        if unit.phase in _TRAINING_PASSES or unit.op_id in units.backward or _in_region(unit, region):
            if current:
                groups.append(current)
            current = None
            continue
        if current is None and unit.computes("vector norm") and not unit.module:
            current = []
        if current is not None and (unit.computes("vector norm") or unit.computes("mul")
                                    or unit.computes("foreach_mul")):  # the norms and the scales, nothing else
            current.append(unit)
    if current:
        groups.append(current)
    found = []
    for group in groups:
        norms = [u for u in group if u.computes("vector norm")]
        if any(u.computes("foreach") for u in norms):
            found.append(Found(True, tuple(group), f"{norms[0].op}: every gradient's norm in one pass"))
        elif len(norms) >= 2:  # a norm per gradient, then the norm of their stack
            grads = sum(u.tensors()[0][1].nbytes for u in norms[:-1] if u.tensors())
            predicted = 3 * grads / costs.copy.bytes_per_s * 1e9 + 2 * costs.copy.fixed_ns if grads else float("nan")
            found.append(Found(False, tuple(group), f"{len(norms) - 1} gradients' norms and scales, one per gradient",
                               sum(u.time_ns for u in group) - predicted, 3.0 * grads if grads else float("nan")))
    return found


def zero_grad(units: Units, entry: CatalogueEntry, costs: Costs) -> list[Found]:
    """``zero_grad``: the kernels inside the entry's region (``Optimizer.zero_grad#``) write zeros into every
    gradient (``set_to_none=False``); ``set_to_none=True`` launches none, so the saving is their whole time. Done:
    the window holds the region (``Units.regions``) and no kernel ran in it."""
    region = re.compile(entry.region) if entry.region else None
    writes = _runs(units, lambda u: _in_region(u, region))
    found = [Found(False, tuple(run), f"zeros written into the gradients by {' + '.join(sorted({u.op for u in run}))} "
                                      "(set_to_none=False)",
                   float(sum(u.time_ns for u in run)), 0.0) for run in writes]
    if not writes and region is not None:
        found = [Found(True, (), "no kernel in zero_grad (set_to_none=True)") for name in units.regions
                 if region.search(name)]
    return found


def grad_scaler(units: Units, entry: CatalogueEntry, costs: Costs) -> list[Found]:
    """The grad scaler's unscale and inf check, and its scale update: torch's GradScaler does each for every
    gradient in one multi-tensor op — done, its time the evidence."""
    return [Found(True, (u,), f"{u.op} (every gradient in one multi-tensor pass)")
            for u in units.computing("grad scaler")]


LARGE_VOCABULARY = 8192  # logits at least this wide are a vocabulary's (a classifier's few classes are not)


def linear_ce(units: Units, entry: CatalogueEntry, costs: Costs) -> list[Found]:
    """Cross-entropy over a large vocabulary: a log_softmax whose input comes (through casts) from a GEMM at
    least ``LARGE_VOCABULARY`` wide — the LM head's N × V logits — with the nll_loss reading it, and every
    backward op autograd ran for them (the loss's and log_softmax's gradients, the head's two GEMMs). A fused
    linear cross-entropy (Liger's) computes the logits a chunk at a time and never holds them all: the head's
    GEMMs stay (their measured time is kept), the casts, the float log_softmax and its gradient go, and one
    kernel reads each logits chunk and writes its gradient in place — 2 × N × V in the logits' dtype at the copy
    rate. The N × V writes it removes are memory it never allocates. Fused: a unit computing ``fused cross
    entropy``."""
    found = []
    for unit in units.computing("fused cross entropy", "log_softmax"):
        if unit.computes("fused cross entropy"):
            found.append(Found(True, (unit,), f"{unit.op or unit.kernel} (the loss over the logits in one)"))
            continue
        if not unit.computes("log_softmax") or not unit.tensors():
            continue
        sources, casts = units.sources(unit.op_id, unit.tensors()[0][0], _copy, depth=4)
        heads = [u for u in sources if u.is_gemm and not u.batched and (u.width or 0) >= LARGE_VOCABULARY
                 and u.outputs]
        if not heads:
            continue
        head = heads[0]
        loss = [c for c in units.consumers(unit.op_id) if c.computes("nll_loss_forward") or c.computes("nll_loss")]
        if not loss:  # log-probabilities for sampling or beam search: no loss, no logits to spare
            continue
        forward = {u.op_id: u for u in (head, *casts, unit, *loss)}
        backward = [u for u in units if units.forward_of.get(u.op_id) in forward]
        group = sorted([*forward.values(), *backward], key=lambda u: u.order)
        logits = head.outputs[0]
        cells = math.prod(logits.dims)
        fused_bytes = 2.0 * logits.nbytes
        kept = sum(u.time_ns for u in group if u.is_gemm)
        saving = sum(u.time_ns for u in group) - kept - float(costs.copy.time_ns(fused_bytes))
        writes = [v for u in group if u not in loss for v in u.outputs if math.prod(v.dims) == cells]
        found.append(Found(False, tuple(group), f"LM head ({head.width:,} wide) → log_softmax → nll_loss"
                           + (" and their backward" if backward else "")
                           + f" ({len(writes)} N × V writes, {sum(v.nbytes for v in writes) / 1e6:,.1f} MB)",
                           saving, fused_bytes))
    return found


_NLL = ("nll_loss", "nll_loss_forward", "nll_loss_nd", "nll_loss2d_forward")
_BINARY_LOSSES = ("binary_cross_entropy_with_logits", "binary_cross_entropy")  # ATen's, by their bare name


def cross_entropy(units: Units, entry: CatalogueEntry, costs: Costs) -> list[Found]:
    """A loss over class scores, however many classes (a classifier's 10 or 1,000, an LM head's vocabulary: the
    ``linear_ce`` pattern's): a forward log_softmax whose output an nll_loss reads (through casts) or whose
    gradient autograd ran (a training loss, where the trace records no nll_loss op) is the loss apart — its
    log_softmax, nll_loss and their backward ops — and a binary cross-entropy with logits, a composite of a dozen
    elementwise kernels, is by the backward units that differentiate it (the trace names the forward op of each).
    Fused: one unit computing the loss (``fused cross entropy``, or log_softmax and nll_loss in one kernel)."""
    found = []
    for unit in units.computing("fused cross entropy", "log_softmax"):
        if unit.computes("fused cross entropy") or any(unit.computes("log_softmax", n) for n in _NLL):
            found.append(Found(True, (unit,), f"{_name(unit)} (the loss in one)"))
            continue
        if unit.op_id in units.backward:
            continue
        loss = units.reaches(unit.op_id, lambda u: any(u.computes(n) for n in _NLL), _copy, depth=3)
        forward = {unit.op_id, *(u.op_id for u in loss)}
        backward = [u for u in units if units.forward_of.get(u.op_id) in forward]
        if loss or backward:
            group = sorted([unit, *loss, *backward], key=lambda u: u.order)
            found.append(Found(False, tuple(group), " → ".join(_name(u) for u in (unit, *loss)) +
                               (" and their backward" if backward else "") + f" ({len(group)} units)"))
    binary = [u for u in units if u.forward_op.rpartition("::")[2] in _BINARY_LOSSES]
    if binary:
        found.append(Found(False, tuple(binary), f"{binary[0].forward_op}'s backward: {len(binary)} units apart"))
    return found


def chain(units: Units, entry: CatalogueEntry, costs: Costs) -> list[Found]:
    """A user's chain: a unit computing ``entry.kinds[0]`` whose output feeds (through casts) one computing the
    next kind, and so on; fused: one unit computing them all."""
    kinds = entry.kinds
    if not kinds:
        return []
    found = []
    for unit in units.computing(kinds[0], forward=True):  # fused or the chain's first: both compute its first kind
        if unit.computes(*kinds):
            found.append(Found(True, (unit,), f"{unit.op or unit.kernel} ({' and '.join(kinds)} in one)"))
            continue
        if not unit.computes(kinds[0]):
            continue
        group = [unit]
        for kind in kinds[1:]:
            nxt = units.reaches(group[-1].op_id, partial(_computes, kind=kind), _copy, depth=3)
            if not nxt:
                break
            group.append(nxt[0])
        if len(group) == len(kinds):
            found.append(Found(False, tuple(group), " → ".join(u.op for u in group), _memory_saving(group, units, costs)))
    return found


def kernels(units: Units, entry: CatalogueEntry, costs: Costs) -> list[Found]:
    if not entry.fused:
        return []
    wanted = re.compile(entry.fused, re.IGNORECASE)
    named: dict[tuple[str, str], bool] = {}  # a window repeats a few hundred (kernel, op) names: each searched once
    for u in units:
        if (u.kernel, u.op) not in named:
            named[(u.kernel, u.op)] = bool(wanted.search(u.kernel) or wanted.search(u.op))
    return [Found(True, (u,), u.op or u.kernel) for u in units if named[(u.kernel, u.op)]]


Pattern = Callable[[Units, CatalogueEntry, Costs], list[Found]]
PATTERNS: dict[str, Pattern] = {
    "add_rmsnorm": add_rmsnorm, "silu_mul": silu_mul, "gate_up": gate_up, "qkv": qkv, "attention": attention,
    "epilogue": epilogue, "rope_cache": rope_cache, "dequant_gemm": dequant_gemm, "sampling": sampling,
    "optimizer": optimizer, "clip": clip, "zero_grad": zero_grad, "grad_scaler": grad_scaler, "linear_ce": linear_ce,
    "cross_entropy": cross_entropy,
    "chain": chain, "kernels": kernels,
}


# Per window's units (weakly: the memo goes with them), each pattern's instances by entry and cost models
_FOUND: weakref.WeakKeyDictionary[Units, dict[tuple[object, ...], tuple[list[Found], Costs]]] = \
    weakref.WeakKeyDictionary()


def found_once(pattern: Pattern, units: Units, entry: CatalogueEntry, costs: Costs) -> list[Found]:
    """``pattern(units, entry, costs)``, found once per window: the fusion table's classes (``fusion_classes``) and
    the audit ask the same finders (attention, epilogue, clipping, zero-grad, linear cross-entropy) of one window's
    units, entry and cost models (the roof, copy model and registry, by identity: each caller makes its own
    ``Costs`` of the same three). A new list each time: ``find`` extends its own."""
    key = (pattern, entry, id(costs.roof), id(costs.copy), id(costs.registry))
    mine = _FOUND.setdefault(units, {})
    if key not in mine:
        mine[key] = (pattern(units, entry, costs), costs)  # the costs kept: their objects' ids stay theirs
    return list(mine[key][0])


def find(units: Units, entry: CatalogueEntry, costs: Costs) -> list[Found]:
    """Every instance of one catalogue entry: its pattern's, and units its ``fused`` regex names."""
    pattern = PATTERNS.get(entry.pattern)
    if pattern is None:
        from fuseprof.errors import InvalidArgumentError

        raise InvalidArgumentError(f"catalogue entry {entry.name!r}: no pattern {entry.pattern!r}; the patterns are "
                                   f"{', '.join(PATTERNS)}")
    found = found_once(pattern, units, entry, costs)
    if entry.pattern not in ("kernels", "epilogue") and entry.fused:
        seen = {u.op_id for f in found if f.fused for u in f.units}
        found += [f for f in kernels(units, entry, costs) if f.units[0].op_id not in seen]
    return found
