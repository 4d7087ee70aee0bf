"""What torch.profiler adds to the host, per recorded event, under the settings users run (issue 59, point 1).

    python scripts/calibrate_profiler_cost.py --out DIR [--units 2000] [--rounds 7]

A ProfilerStep span in a trace is the host's time *with* the profiler recording every op, launch, range, module
and stack frame; a user acts on the time without it. This script measures the difference on the machine it runs
on, so that a trace's host time can be corrected by the counts of what it recorded.

Micro-workloads, each a loop of ``--units`` identical units (the unit named below), timed on the host clock after a
device synchronize: first without the profiler, before the process has run any profiler (a profiler session that has
ended leaves the process slower for the rest of its life, and a user's run without the profiler never paid that);
then inside a running profiler under each setting, settings interleaved round by round with un-profiled loops (whose
ratio to the first is the after-effect, printed). A setting's median per unit less the never-profiled median is the
profiler's cost of one unit:

    cpu_op        one aten op on small CPU tensors (an op, no launch)
    cuda_op       one aten op on small CUDA tensors (an op, its launch call, its kernel record)
    py_call       one call of an empty Python function (with_stack records each Python call as an event)
    range         one empty record_function range
    module        one call of a tiny nn.Module doing one CUDA op (module range + op + launch)
    graph_replay  one replay of a captured CUDA graph of 8 small kernels (one graph launch, 8 kernel records)
    item_sync     one CUDA op then .item() (op, launch, a device-to-host copy and its synchronisation)

Settings: ``none`` (no profiler), ``activities`` (CPU + CUDA), ``shapes`` (+ record_shapes), ``stack`` (+ shapes,
with_modules, with_stack), ``memory`` (+ shapes, profile_memory).

Then a held-out check: a small eager transformer decode step (not used to fit anything) timed without the profiler
and profiled under each setting; its trace's counts of ops, launches, ranges and modules times the fitted per-unit
costs predict the profiled step, and the prediction's error is written beside the measurement.

Writes ``DIR/profiler_cost.json`` (machine, versions, per workload and setting: median, p10, p90 µs per unit and
the cost over ``none``; the held-out check). Runs on CPU too (the CUDA workloads are then skipped), which is what
the tests do.
"""

from __future__ import annotations

import argparse
import gzip
import json
import platform
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile, record_function

CUDA = torch.cuda.is_available()
SETTINGS: dict[str, dict[str, Any]] = {
    "activities": {},
    "shapes": {"record_shapes": True},
    "stack": {"record_shapes": True, "with_modules": True, "with_stack": True},
    "memory": {"record_shapes": True, "profile_memory": True},
}


def _sync() -> None:
    if CUDA:
        torch.cuda.synchronize()


def _empty() -> None:
    pass


class _Tiny(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + 1


def workloads(units: int) -> dict[str, Callable[[], None]]:
    """Each a loop of ``units`` identical units (see the module's docstring)."""
    a, b = torch.randn(16), torch.randn(16)

    def cpu_op() -> None:
        for _ in range(units):
            torch.add(a, b)

    loops: dict[str, Callable[[], None]] = {"cpu_op": cpu_op}

    def range_() -> None:
        for _ in range(units):
            with record_function("calibration_range"):
                pass

    def py_call() -> None:
        for _ in range(units):
            _empty()

    loops["range"] = range_
    loops["py_call"] = py_call
    if not CUDA:
        return loops
    x, y = torch.randn(16, device="cuda"), torch.randn(16, device="cuda")
    tiny = _Tiny().cuda()
    stream = torch.cuda.Stream()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream):  # warm-up off the capture, as torch.cuda.graph's docs ask
        for _ in range(3):
            z = x
            for _ in range(8):
                z = z + 1
    torch.cuda.current_stream().wait_stream(stream)
    with torch.cuda.graph(graph):
        z = x
        for _ in range(8):
            z = z + 1

    def cuda_op() -> None:
        for _ in range(units):
            torch.add(x, y)

    def module() -> None:
        for _ in range(units):
            tiny(x)

    def graph_replay() -> None:
        for _ in range(units):
            graph.replay()

    def item_sync() -> None:
        for _ in range(max(1, units // 4)):  # a sync a unit: fewer units keep the round short
            torch.add(x, y)[0].item()

    loops.update(cuda_op=cuda_op, module=module, graph_replay=graph_replay,
                 item_sync=item_sync)
    return loops


def unit_count(name: str, units: int) -> int:
    return max(1, units // 4) if name == "item_sync" else units


def _activities() -> list[ProfilerActivity]:
    return [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if CUDA else [])


def time_loop(loop: Callable[[], None], setting: str) -> float:
    """Host seconds of one loop, without the profiler or inside one already running (its start-up, the trace's
    post-processing and export stay outside the timed span, as they stay outside a ProfilerStep)."""
    if setting == "none":
        _sync()
        start = time.perf_counter()
        loop()
        _sync()
        return time.perf_counter() - start
    with profile(activities=_activities(), **SETTINGS[setting]):
        loop()  # the first pass inside a fresh profiler pays one-time set-up: not timed
        _sync()
        start = time.perf_counter()
        loop()
        _sync()
        return time.perf_counter() - start


def _summary(values: list[float]) -> dict[str, float]:
    q = statistics.quantiles(values, n=10) if len(values) > 1 else [values[0]] * 9
    return {"median_us": statistics.median(values), "p10_us": q[0], "p90_us": q[-1]}


def never_profiled(loops: dict[str, Callable[[], None]], units: int, rounds: int) -> dict[str, list[float]]:
    """Each loop's µs a unit, ``rounds`` times, in a process that has not yet run the profiler: a profiler
    session that has ended leaves the process slower for the rest of its life (eager steps 1.16-1.36x on an H100,
    ``scripts/probe_profiler_after_effect.py``), and a user's run without the profiler never paid that, so the
    cost is taken against this baseline, not against un-profiled loops timed between profiled ones."""
    for loop in loops.values():  # warm-up: allocator, kernels loaded, dispatcher caches
        loop()
    first: dict[str, list[float]] = {name: [] for name in loops}
    for _ in range(rounds):
        for name, loop in loops.items():
            first[name].append(time_loop(loop, "none") / unit_count(name, units) * 1e6)
    return first


def _costs(values: list[float], baseline: list[float]) -> dict[str, float]:
    """A setting's cost a unit against the never-profiled baseline: its median, p10 and p90 less the
    baseline's median."""
    summary, base = _summary(values), statistics.median(baseline)
    return {"cost_us": summary["median_us"] - base, "cost_p10_us": summary["p10_us"] - base,
            "cost_p90_us": summary["p90_us"] - base}


def measure(units: int, rounds: int) -> dict[str, dict[str, Any]]:
    """Per workload and setting: the time of a unit (median, p10, p90 over rounds) and the profiler's cost of a
    unit against the loop timed before any profiler ran (``never_profiled``); ``none`` is the loop timed
    between profiled ones, round by round, and ``after_effect`` its median over the never-profiled one's."""
    loops = workloads(units)
    first = never_profiled(loops, units, rounds)
    samples: dict[str, dict[str, list[float]]] = {w: {s: [] for s in ("none", *SETTINGS)} for w in loops}
    for r in range(rounds):
        for name, loop in loops.items():
            for setting in ("none", *SETTINGS):
                samples[name][setting].append(time_loop(loop, setting) / unit_count(name, units) * 1e6)
        print(f"round {r + 1}/{rounds} done", file=sys.stderr, flush=True)
    table: dict[str, dict[str, Any]] = {}  # per setting a summary; never_profiled, and after_effect (a ratio)
    for name, by_setting in samples.items():
        table[name] = {"never_profiled": _summary(first[name]),
                       "after_effect": statistics.median(by_setting["none"]) / statistics.median(first[name])}
        for setting, values in by_setting.items():
            table[name][setting] = {**_summary(values), **_costs(values, first[name])}
    return table


def per_event_costs(table: dict[str, dict[str, Any]]) -> dict[str, dict[str, float]]:
    """The cost of one recorded event of each kind, per setting, from the workloads' differences: an op from
    cpu_op (CPU) and cuda_op (CUDA, where its launch and kernel come with it), a launch with its kernel as
    cuda_op − cpu_op, a range, a module as module − cuda_op, a graph launch, a Python call (with_stack's events)."""
    out: dict[str, dict[str, float]] = {}
    for setting in SETTINGS:
        cost = {w: table[w][setting]["cost_us"] for w in table}
        row = {"op": cost["cpu_op"], "range": cost["range"], "stack_frame": cost["py_call"]}
        if "cuda_op" in cost:
            row["launch_with_kernel"] = cost["cuda_op"] - cost["cpu_op"]
            row["module"] = cost["module"] - cost["cuda_op"]
            row["graph_launch"] = cost["graph_replay"]
            row["sync"] = cost["item_sync"] - cost["cuda_op"]
        out[setting] = row
    return out


class _Decoder(nn.Module):
    """A small eager decoder: the held-out workload (never used to fit a cost)."""

    def __init__(self, d: int = 512, layers: int = 4) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.TransformerDecoderLayer(d, 8, 4 * d, batch_first=True) for _ in range(layers))
        self.head = nn.Linear(d, 4096)

    def forward(self, x: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x, memory)
        return self.head(x)


def _trace_counts(path: Path) -> dict[str, int]:
    """Counts of what one profiled step recorded, read from its exported trace: CPU ops, launch calls (runtime
    and driver), user ranges and python_function events (modules and, with with_stack, frames)."""
    events = json.loads(path.read_text())["traceEvents"]
    kinds: Counter[str] = Counter()
    for e in events:
        cat, name = e.get("cat"), e.get("name", "")
        if cat == "cpu_op":
            kinds["op"] += 1
        elif cat in ("cuda_runtime", "cuda_driver") and "Launch" in name:
            kinds["launch_with_kernel"] += 1
        elif cat == "user_annotation":
            kinds["range"] += 1
        elif cat == "python_function":
            kinds["module" if name.startswith("nn.Module:") else "stack_frame"] += 1
    return dict(kinds)


def decoder_block(steps: int) -> Callable[[], None]:
    """``steps`` steps of the held-out decoder, warmed up."""
    device = "cuda" if CUDA else "cpu"
    model = _Decoder().to(device).eval()
    x, memory = torch.randn(1, 1, 512, device=device), torch.randn(1, 64, 512, device=device)

    def step() -> None:
        with torch.no_grad():
            model(x, memory)

    def block() -> None:
        for _ in range(steps):
            step()

    for _ in range(5):
        step()
    return block


def held_out(costs: dict[str, dict[str, float]], block: Callable[[], None], first: list[float], steps: int,
             rounds: int) -> dict[str, Any]:
    """The decoder step under each setting (and without the profiler between them), against its step timed
    before any profiler ran (``first``, µs), and the per-event prediction of the profiler's cost from the counts
    its trace recorded."""
    samples: dict[str, list[float]] = {s: [] for s in ("none", *SETTINGS)}
    for _ in range(rounds):
        for setting in samples:
            samples[setting].append(time_loop(block, setting) / steps * 1e6)
    result: dict[str, Any] = {"steps_per_round": steps, "never_profiled": _summary(first),
                              "none": _summary(samples["none"])}
    with tempfile.TemporaryDirectory() as tmp:
        for setting in SETTINGS:
            trace = Path(tmp) / f"{setting}.json"
            with profile(activities=_activities(), **SETTINGS[setting]) as prof:
                block()
            prof.export_chrome_trace(str(trace))
            counts = {k: v / steps for k, v in _trace_counts(trace).items()}
            predicted = sum(counts.get(k, 0) * c for k, c in costs[setting].items() if k in counts)
            cost = _costs(samples[setting], first)
            measured = cost["cost_us"]
            result[setting] = {**_summary(samples[setting]), "counts_per_step": counts,
                               "cost_measured_us": measured, "cost_measured_p10_us": cost["cost_p10_us"],
                               "cost_measured_p90_us": cost["cost_p90_us"], "cost_predicted_us": predicted,
                               "error": (predicted - measured) / measured if measured else None}
    return result


def machine() -> dict[str, Any]:
    facts: dict[str, Any] = {"torch": torch.__version__, "python": platform.python_version(),
                             "cpu": platform.processor() or platform.machine(), "cuda": torch.version.cuda}
    if CUDA:
        facts["gpu"] = torch.cuda.get_device_name()
        try:
            import pynvml

            pynvml.nvmlInit()
            facts["driver"] = pynvml.nvmlSystemGetDriverVersion()
        except Exception:  # NVML absent or refused: the driver stays unrecorded
            pass
    return facts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--units", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=20, help="held-out decoder steps per round and setting")
    args = parser.parse_args(argv)
    block = decoder_block(args.steps)  # the held-out step's baseline, too, before any profiler runs
    first = [time_loop(block, "none") / args.steps * 1e6 for _ in range(args.rounds)]
    table = measure(args.units, args.rounds)
    costs = per_event_costs(table)
    result = {"machine": machine(), "units": args.units, "rounds": args.rounds, "workloads": table,
              "per_event_us": costs, "held_out_decoder": held_out(costs, block, first, args.steps, args.rounds),
              "baseline": "each loop timed before the process ran any profiler (never_profiled)",
              "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    args.out.mkdir(parents=True, exist_ok=True)
    text = json.dumps(result, indent=1)
    (args.out / "profiler_cost.json").write_text(text)
    with gzip.open(args.out / "profiler_cost.json.gz", "wt") as fh:
        fh.write(text)
    print(f"{'setting':<11}" + "".join(f"{k:>20}" for k in costs["activities"]))
    for setting, row in costs.items():
        print(f"{setting:<11}" + "".join(f"{v:>20.3f}" for v in row.values()))
    for setting in SETTINGS:
        h = result["held_out_decoder"][setting]
        print(f"held-out decoder {setting}: never profiled "
              f"{result['held_out_decoder']['never_profiled']['median_us']:.0f} µs, "
              f"profiler's cost measured +{h['cost_measured_us']:.0f} µs (p10 {h['cost_measured_p10_us']:.0f}, "
              f"p90 {h['cost_measured_p90_us']:.0f}), predicted +{h['cost_predicted_us']:.0f} µs")
    for name, loop_row in table.items():
        print(f"{name}: un-profiled between profiled loops {loop_row['after_effect']:.2f}x the never-profiled loop")
    return 0


if __name__ == "__main__":
    sys.exit(main())
