"""``fuseprof fusion TRACE --verify N``: run the fusions the finder predicted and compare.

Each of the top-N chains becomes a case (``fuseprof.case.Case``) whose inputs are random tensors of
the recorded shapes, dtypes and strides (``fuseprof.verify.replay``), with two variants: ``eager`` (the
recorded aten ops, one kernel or more each, as the trace ran them) and ``compiled`` (the same program
under ``torch.compile(dynamic=False)``: Inductor's fusion of it). Both are checked against the float64
replay and then timed as every case is (``fuseprof.capture.measure.check_and_time``: CUDA graph
replay, L2 flushed before each sample). One bundle holds the timing rows with each chain's prediction; ``fuseprof.verify.table`` sets
prediction beside realisation.

On a CPU the variants are checked and the bundle written, but nothing is timed against the
prediction: CPU times say nothing of a GPU kernel.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from fuseprof.bundle.provenance import now_utc
from fuseprof.capture.bench import bench_manifest, write_timings_bundle
from fuseprof.capture.device_facts import device_facts
from fuseprof.capture.measure import check_and_time
from fuseprof.capture.profile import resolve_device
from fuseprof.case import DEFAULT_TOLERANCES, Case, Variant
from fuseprof.console import Log
from fuseprof.errors import FuseprofError, NoGPUError, UserCodeError
from fuseprof.model.registry import Registry
from fuseprof.parse.hashing import file_sha256
from fuseprof.verify.chains import ChainToVerify
from fuseprof.verify.kernels import kernel_variant
from fuseprof.verify.replay import Program, ReplayError, build_program
from fuseprof.verify.table import PREDICTION_COLUMNS


def chain_case(chain: ChainToVerify, program: Program, device: torch.device, registry: Registry) -> Case:
    """The chain as a case: eager and compiled variants of its program, and fuseprof's kernel where one
    computes the chain (``fuseprof.verify.kernels``); the float64 replay is the reference."""

    def eager(*inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return program.run(*inputs, device=device)

    def reference(*inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        wide = [x.to(torch.float64, copy=True) if x.dtype.is_floating_point else x.clone() for x in inputs]
        return program.run(*wide, device=device, float64=True)

    dtype = str(program.precision).removeprefix("torch.")  # checked as exact as its least precise tensor
    kernel = kernel_variant(chain.signature, program, device.type, registry)
    return Case(
        name=f"chain{chain.fusion_row}", description=chain.signature,
        variants=(Variant("eager", eager, "unfused", "the recorded aten ops, replayed"),
                  Variant("compiled", torch.compile(eager, dynamic=False), "compiled",
                          "torch.compile(dynamic=False) of the replay"), *([kernel] if kernel else [])),
        make_inputs=lambda shape, dtype, dev, generator: program.make_inputs(torch.device(dev), generator),
        reference=reference, nominal_bytes=lambda shape, dtype: int(chain.fused_bytes),
        default_shapes=((chain.chain_kernels,),), dtypes=(dtype,),
        tolerances={**DEFAULT_TOLERANCES, dtype: DEFAULT_TOLERANCES.get(dtype, 1e-2)},
        mutates_inputs=program.mutates_inputs)


def kernels_per_call(fn: Any, inputs: tuple[Any, ...]) -> int:
    """GPU kernels one call launches, counted by torch.profiler (how far torch.compile fused the chain)."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA], acc_events=True) as prof:
        fn(*inputs)
        torch.cuda.synchronize()
    return sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
               and "memcpy" not in e.name.lower() and "memset" not in e.name.lower())


def _verify_one(chain: ChainToVerify, device: torch.device, repeats: int, seed: int, log: Log,
                registry: Registry) -> pd.DataFrame:
    program = build_program(chain.ops, registry, chain.links)
    case = chain_case(chain, program, device, registry)
    shape = case.default_shapes[0]
    log(f"fuseprof verify: chain {chain.fusion_row} ({chain.chain_kernels} kernels, {len(program.steps)} ops, "
        f"{len(program.inputs)} inputs): {chain.signature[:90]}")
    try:
        frame, _ = check_and_time(case, case.variants, (shape,), case.dtypes[0], device, repeats, seed, log,
                                  keep_calls=False)
    except UserCodeError as exc:  # the "case's code" is fuseprof's replay: torch's reason, not our file and line
        raise ReplayError(f"the replay does not run on this {device.type}: {exc.error} (in {exc.during})") from None
    if device.type == "cuda":
        generator = torch.Generator(device=device)
        generator.manual_seed(seed)
        inputs = program.make_inputs(device, generator)
        frame["kernels_per_call"] = [kernels_per_call(v.fn, inputs) for v in case.variants]
    frame["replay_program"] = "\n".join(program.describe())
    return frame


def default_device() -> str:
    """cuda when torch sees a GPU, else cpu (outputs checked, nothing timed)."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def verify_chains(chains: list[ChainToVerify], trace: Path, device_name: str, out_dir: Path, registry: Registry,
                  repeats: int = 50, seed: int = 0, log: Log = print) -> tuple[pd.DataFrame, Path]:
    """Replay, check and time each chain; write one ``verify-…`` bundle. Returns the timing rows (with each
    chain's prediction) and the bundle's path. A chain that cannot be replayed is a row saying why."""
    started = time.monotonic()
    try:
        device = resolve_device(device_name)
    except NoGPUError:
        raise NoGPUError(f"--verify-device {device_name}: torch sees no CUDA GPU here; --verify-device cpu checks "
                         "the outputs without timing") from None
    repeats = repeats if device.type == "cuda" else min(repeats, 3)  # on a CPU the check is what counts
    frames = []
    for chain in chains:
        prediction = {c: getattr(chain, c) for c in PREDICTION_COLUMNS}
        try:
            if chain.skipped:
                raise ReplayError(chain.skipped)
            frames.append(_verify_one(chain, device, repeats, seed, log, registry).assign(**prediction))
        except FuseprofError as exc:
            log(f"fuseprof verify: chain {chain.fusion_row} not replayed: {exc}")
            frames.append(pd.DataFrame([{**prediction, "case": f"chain{chain.fusion_row}", "skipped": str(exc)}]))
    timings = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    facts = device_facts(device)
    timings["device"] = facts["name"]
    manifest = {**bench_manifest([], (), facts, now_utc(), repeats, seed, device.type),
                "kind": "verify", "case": None, "trace": str(trace),
                "trace_sha256_128": file_sha256(trace),  # the trace store's key: SHA-256's first 128 bits
                "ncu": {"status": "skipped", "reason": "verification run"}}
    return timings, write_timings_bundle(timings, manifest, out_dir, started, log)
