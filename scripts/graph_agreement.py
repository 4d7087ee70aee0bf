"""How often the shape-based dataflow edges equal the execution trace's, on captures that hold both.

    python scripts/graph_agreement.py BUNDLE_OR_TRACE [...]

For each bundle with ``raw/execution_trace.json.gz`` (``fuseprof profile`` and ``fuseprof run`` record it),
or trace ``X.json.gz`` with ``X.et.json.gz`` beside it (scripts/capture_truth_set.py writes those),
the op graph is built twice over the same ops (``fuseprof.analysis.facts.opgraph``): by the execution trace
(tensor storages: the truth) and by shapes alone (what a Kineto trace without one allows). Per bundle it
prints, counting (producer, consumer, argument) edges:

    recall      the execution trace's edges the shape rule also finds
    precision   the shape rule's edges that the execution trace confirms
    chains      the same two inside the fusion finder's chains (what the fused-bytes model and the replay read)
    pairs       recall and precision of (producer, consumer) pairs, whichever argument: an add whose two
                inputs the rule swaps still has the right producers
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from fuseprof.analysis import analyze
from fuseprof.analysis.facts.opgraph import op_graph
from fuseprof.analysis.judgements.fusion import find_chains
from fuseprof.model.registry_data import DEFAULT
from fuseprof.parse.execution_trace import execution_trace_beside, is_execution_trace, read_execution_trace
from fuseprof.parse.store import default_store


def _pairs(graph, members: set[int] | None = None) -> set[tuple[int, int, int]]:  # type: ignore[no-untyped-def]
    """(producer, consumer, argument) of every edge (among ``members`` only, when given)."""
    edges = graph.edges
    if members is not None:
        edges = edges[edges["producer"].isin(members) & edges["consumer"].isin(members)]
    return set(zip(edges["producer"], edges["consumer"], edges["argument"]))


def _share(part: set, whole: set) -> str:  # type: ignore[type-arg]
    return f"{100 * len(part) / len(whole):5.1f}% of {len(whole):,}" if whole else "   (none)"


def pair(path: Path) -> tuple[Path, Path] | None:
    """(Kineto trace, execution trace): a bundle's raw/ pair, or X.json.gz with X.et.json.gz beside it."""
    traces = [p for p in (path / "raw").glob("*.json.gz") if not is_execution_trace(p)] if path.is_dir() else [path]
    et = execution_trace_beside(traces[0]) if len(traces) == 1 else None
    return (traces[0], et) if et is not None else None


def agreement(path: Path) -> str:
    found = pair(path)
    if found is None:
        return f"{path.name}: no execution trace beside it"
    trace, et_path = found
    tables, _ = default_store().tables(trace)
    et = read_execution_trace(et_path)
    by_et, by_shape = op_graph(tables, DEFAULT, et), op_graph(tables, DEFAULT)
    if by_et.basis != "execution trace":
        return f"{path.name}: the execution trace does not join the Kineto trace's ops"
    truth, guess = _pairs(by_et), _pairs(by_shape)
    (result,) = analyze(trace)
    chains = find_chains(result.events, DEFAULT)
    members = {int(o) for m in chains.get("members", []) for o in result.events.loc[m, "op_id"].dropna()}
    in_truth, in_guess = _pairs(by_et, members), _pairs(by_shape, members)
    pairs_t, pairs_g = {e[:2] for e in truth}, {e[:2] for e in guess}
    return (f"{path.name}: {len(by_et.nodes):,} ops; all edges: recall {_share(truth & guess, truth)}, precision "
            f"{_share(truth & guess, guess)}; inside {len(chains)} chains: recall {_share(in_truth & in_guess, in_truth)}, "
            f"precision {_share(in_truth & in_guess, in_guess)}; pairs: recall {_share(pairs_t & pairs_g, pairs_t)}, "
            f"precision {_share(pairs_t & pairs_g, pairs_g)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="+", type=Path, help="bundles, or traces X.json.gz with X.et.json.gz beside")
    for path in parser.parse_args().paths:
        if path.name.endswith(".et.json.gz"):
            continue
        try:
            print(agreement(path), flush=True)
        except Exception as exc:  # one trace's failure (a CPU-only capture: no GPU events) is a line, not the end
            print(f"{path.name}: {type(exc).__name__}: {exc}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
