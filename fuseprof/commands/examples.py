"""Two or more runnable examples per verb, shown at the end of its ``--help`` (and in docs/commands.md): a user's
first question about a verb is what a whole command line looks like. Each runs as written from the checkout on the
committed traces and bundles (the capture verbs need a GPU, or say ``--device cpu``); tests/test_first_hour.py
parses every one with the real parser."""

from __future__ import annotations

EXAMPLES: dict[str, tuple[str, ...]] = {
    "profile": ("fuseprof profile add_rms_norm --shapes 128x4096 --dtype bfloat16",
                "fuseprof profile silu_mul --device cpu --no-ncu --out out"),
    "run": ("fuseprof run --out out examples/region_demo.py --steps 2",
            "fuseprof run --no-ncu --name demo --out out examples/region_demo.py",
            "fuseprof run --no-ncu --unprofiled-steps 3 --out out examples/region_demo.py --steps 6"),
    "bench": ("fuseprof bench add_rms_norm silu_mul --dtype bfloat16",
              "fuseprof bench silu_mul --shapes 128x4096,1024x4096 --device cpu --repeats 5 --out out"),
    "ceilings": ("fuseprof ceilings", "fuseprof ceilings --device cuda:1 --out out"),
    "analyze": ("fuseprof analyze traces/llama4l-eager-h200 --top 5",
                "fuseprof analyze traces/llama4l-eager-h200 --sections verdict,worth_doing,categories --top 3",
                "fuseprof analyze tests/fixtures/tp2 --format csv --out out/tp2-tables"),
    "fusion": ("fuseprof fusion traces/llama4l-eager-h200 --top 3",
               "fuseprof fusion traces/llama4l-eager-h200 --verify 2 --out out"),
    "audit": ("fuseprof audit traces/llama4l-compiled-h200",
              "fuseprof audit traces/llama4l-eager-h200 --format json"),
    "check": ("fuseprof check traces/llama4l-eager-h200",
              "fuseprof check tests/fixtures/tp2 --format csv"),
    "report": ("fuseprof report traces/llama4l-eager-h200 -o out/report.html --force",
               "fuseprof report tests/fixtures/tp2 -o out/tp2.html --top 10"),
    "store": ("fuseprof store", "fuseprof store --clear"),
    "diff": ("fuseprof diff traces/llama4l-eager-h200 traces/llama4l-compiled-h200 --top 5",
             "fuseprof diff traces/llama4l-eager-h200 traces/llama4l-compiled-h200 --fail-on 'busy:+5%,kernels:+0'"),
    "path": ("fuseprof path traces/llama4l-eager-h200",
             "fuseprof path tests/fixtures/tp2 --top 5"),
    "whatif": ("fuseprof whatif traces/llama4l-eager-h200 --fuse top:3",
               "fuseprof whatif traces/llama4l-eager-h200 --graph step --compile Attention"),
    "export": ("fuseprof export traces/llama4l-eager-h200 --perfetto out/llama4l.json.gz --force",
               "fuseprof export tests/fixtures/tp2 --perfetto out/tp2.json.gz --force"),
    "sql": ("fuseprof sql --tables traces/llama4l-eager-h200",
            "fuseprof sql \"SELECT category, sum(dur_ns) AS ns FROM kernels GROUP BY 1 ORDER BY 2 DESC\" "
            "traces/llama4l-eager-h200 --window all"),
    "compare": ("fuseprof compare traces/verify",
                "fuseprof compare traces/silu_mul-bfloat16-h200-20261129t172803z --baseline fused_cuda"),
    "breakdown": ("fuseprof breakdown traces/decoder_layer-bfloat16-h200-20261129t174445z",
                  "fuseprof breakdown traces/add_rms_norm-bfloat16-h200-20261129t092340z --format csv"),
    "summary": ("fuseprof summary traces", "fuseprof summary traces --case add_rms_norm --format csv"),
    "roofline": ("fuseprof roofline traces/add_rms_norm-bfloat16-h200-20261129t092340z",
                 "fuseprof roofline traces --case silu_mul --roof 'H100 SXM'"),
    "ingest": ("fuseprof ingest tests/fixtures/compiled_128x4096.ncu-rep --out out",
               "fuseprof ingest tests/fixtures/tp2/tp_mlp-rank0.json.gz --name tp-rank0 --out out"),
    "reparse": ("fuseprof reparse traces/add_rms_norm-bfloat16-h200-20261129t092340z",
                "fuseprof reparse traces"),
    "ls": ("fuseprof ls", "fuseprof ls traces"),
    "show": ("fuseprof show traces/add_rms_norm-bfloat16-h200-20261129t092340z --source ncu",
             "fuseprof show traces/add_rms_norm-bfloat16-h200-20261129t092340z --timings"),
    "columns": ("fuseprof columns", "fuseprof columns --wide"),
    "cases": ("fuseprof cases", "fuseprof cases --wide"),
    "dashboard": ("fuseprof dashboard traces", "fuseprof dashboard traces --port 8600 --address 0.0.0.0"),
}


def epilog(name: str) -> str | None:
    """The ``examples:`` block of a verb's ``--help``; None for a verb with none."""
    lines = EXAMPLES.get(name)
    return "examples:\n" + "\n".join(f"  {line}" for line in lines) if lines else None
