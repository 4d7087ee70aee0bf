"""fuseprof: measure what fusing GPU kernels buys.

``fuseprof.load(path)`` gives one DataFrame of kernel launches over a bundle or a folder of
bundles; ``fuseprof.load_timings(path)`` the per-variant timings. Importing the package
touches no GPU and imports no torch.
"""

from __future__ import annotations

__version__ = "0.1.0"

from fuseprof.load import load, load_timings  # noqa: E402

__all__ = ["load", "load_timings", "__version__"]
