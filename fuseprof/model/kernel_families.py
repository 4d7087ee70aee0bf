"""Kernel families mined from the libraries' own sources: the registry's rows for kernels no op names.

``scripts/mine_kernel_families.py`` reads the source trees of FlashInfer, aiter, Composable Kernel, DeepEP,
DeepGEMM, FlashMLA, FlashAttention, Liger, Apex, TransformerEngine, torchao, FBGEMM, NCCL, hipBLASLt (Tensile's
generated solution names) and MIOpen at named commits (with
single files of vLLM and SGLang, and cuBLASLt's and cuDNN's names from their vendor wheels at named versions) and writes
``kernel_families.json`` beside this module: per family, a kernel-name pattern, the category it is, the kinds it
computes (what the audit's dataflow patterns read: ``add`` and ``rms norm`` for a fused add + RMSNorm, ``rotary`` and
``cache write`` for RoPE fused with the KV-cache write), and the names its library's sources define, each with its
``repo@commit:path`` (the tests' cases). The file is data: its rows are checked by ``registry_schema`` as a
``--registry`` file's are (a bad pattern is one clear error, never code run), and become ``OpFamily`` and
``OpKinds`` rows of the default registry (``registry_data``), ahead of the generic kernel-name rows, so a
FlashInfer norm is a norm before "flash" makes it attention.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from fuseprof.errors import InvalidArgumentError
from fuseprof.model.registry import OpFamily, OpKinds
from fuseprof.model.registry_schema import rows

FAMILIES_FILE = Path(__file__).with_name("kernel_families.json")


def read(path: Path = FAMILIES_FILE) -> dict[str, Any]:
    """The mined file as written (families with their names and sources, the trace-only names, the commits); one
    clear line where it is not JSON, or not an object whose ``families`` is a list of objects."""
    where = f"kernel families {path}"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise InvalidArgumentError(f"{where}: not a readable JSON file ({str(exc)[:120]})") from None
    families = data.get("families") if isinstance(data, dict) else None
    if not isinstance(families, list) or not all(isinstance(f, dict) for f in families):
        raise InvalidArgumentError(f"{where}: expected an object whose 'families' is a list of objects")
    return dict(data)


@functools.lru_cache(maxsize=4)
def mined_rows(path: Path = FAMILIES_FILE) -> tuple[tuple[OpFamily, ...], tuple[OpKinds, ...]]:
    """The file's families as registry rows: an ``OpFamily`` per family (its name marked mined) and an ``OpKinds``
    per family that computes a kind, each checked by the registry's schema."""
    families = read(path)["families"]
    document = {  # a missing or mistyped value is the schema's error, as in a --registry file
        "family": [{"category": f.get("category"), "kernel": f.get("kernel"), "family": f"{f.get('name')} (mined)"}
                   for f in families],
        "op_kinds": [{"kernel": f.get("kernel"), "kinds": f.get("kinds")} for f in families if f.get("kinds")],
    }
    made = rows(document, str(path))
    return tuple(made["family"]), tuple(made["op_kinds"])
