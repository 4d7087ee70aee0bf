"""The capture settings a trace may lack, as data (no pandas: ``check``'s ``--require`` reads the names while its
arguments are parsed, before any heavy import): per integrity check, the ``--require`` name that makes its failure
fail ``check``, the analyses it limits, and the torch.profiler setting (or fuseprof option) that fills it in.
``fuseprof.analysis.facts.completeness`` gives such a failed check the kind "setting"."""

from __future__ import annotations

SETTINGS: dict[str, tuple[str, str, str]] = {
    "shapes_recorded_pct": ("shapes", "the per-op roofline, fusion's shapes and the diff's op signatures",
                            "torch.profiler.profile(record_shapes=True)"),
    "modules_recorded_pct": ("modules", "the module column of the top ops and the audit's layers",
                             "torch.profiler.profile(with_modules=True)"),
    "timestamp_resolution_ns": ("ns", "short kernels' durations (each up to 1 µs off) and the per-op roofline",
                                "a torch >= 2.0 profiler, which writes ns (µs with three decimals)"),
    "nccl_metadata": ("nccl", "the collectives table's bytes and bus bandwidth",
                      "a newer torch, whose c10d writes the metadata on record_param_comms"),
    "stream_wait_ids": ("stream-wait-ids", "nothing fuseprof computes (HTA's critical path follows them)",
                        "a newer torch, whose Kineto writes wait_on_cuda_event_record_corr_id"),
    "kernels_without_device": ("device", "the roofline's peaks (the GPU is unknown)", "fuseprof --device NAME"),
    "attributed_kernel_time_pct": ("attribution", "the top ops, fusion and the audit (kernels without an op)",
                                   "--graph-capture for graph replays; CPU activity on for eager kernels"),
    "graph_kernel_time_attributed_pct": ("graph-capture", "the ops, shapes and modules of graph-replayed kernels",
                                         "--graph-capture CAPTURE (the trace taken while the graphs were captured), "
                                         "or --eager-twin EAGER (an eager trace of the same model)"),
    "gpus_in_trace": ("one-gpu", "the 'all' timeline row, idle time and steps (one GPU's busy time)",
                      "one profiler per process and GPU, or analyse each GPU's trace on its own"),
}
REQUIRABLE = tuple(sorted({v[0] for v in SETTINGS.values()}))
