"""The names of the cases shipped in ``kernels/`` (installed as ``fuseprof_kernels``), found without importing
any of them: a leaf every layer may read, so that a registry (the model layer) can refuse a case that is not one
of them before anything is imported, and ``fuseprof.case`` loads only these by name."""

from __future__ import annotations

import importlib.util
import pkgutil


def builtin_case_names() -> list[str]:
    """Names of the cases shipped in ``kernels/``."""
    spec = importlib.util.find_spec("fuseprof_kernels")
    if spec is None or not spec.submodule_search_locations:
        return []
    return sorted(m.name for m in pkgutil.iter_modules(list(spec.submodule_search_locations))
                  if m.ispkg and not m.name.startswith("_"))
