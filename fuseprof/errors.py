"""Named errors. Each message says what went wrong and what to do about it.

The CLI prints ``str(error)`` and exits non-zero instead of showing a traceback, so every
message here must stand on its own.
"""

from __future__ import annotations


class FuseprofError(Exception):
    """Base class: anything the CLI reports as a one-line message."""

    exit_code = 2


class CaseNotFoundError(FuseprofError):
    """A case name or ``module:attribute`` spec that does not resolve to a Case."""


class UserCodeError(FuseprofError):
    """A case's own code (inputs, reference or a variant) raised: one line with its file and line. The parts
    stay apart (``where``, ``error``, ``during``) for callers whose "user code" is fuseprof's own (a replay)."""

    def __init__(self, where: str, error: str, during: str) -> None:
        super().__init__(f"{where}: {error} (in {during})")
        self.where, self.error, self.during = where, error, during


class InvalidArgumentError(FuseprofError):
    """A command-line value that cannot be used (bad shape, unknown variant or dtype)."""


class NoGPUError(FuseprofError):
    """CUDA capture asked for on a machine without a usable CUDA device."""


class CorrectnessError(FuseprofError):
    """A variant disagrees with the float64 reference beyond its dtype's tolerance."""


class NcuError(FuseprofError):
    """Nsight Compute could not produce metrics. The torch.profiler part is still saved."""

    exit_code = 3


class NcuNotFoundError(NcuError):
    """No ``ncu`` executable on PATH or in the usual install folders."""


class NcuPermissionError(NcuError):
    """The driver refused access to the GPU performance counters (ERR_NVGPUCTRPERM)."""


class NcuTimeoutError(NcuError):
    """``ncu`` ran past the time limit and was stopped."""


class NcuNoKernelsError(NcuError):
    """``ncu`` ran but profiled no kernel inside the NVTX ranges."""


class NcuFailedError(NcuError):
    """``ncu`` exited with an error not covered by a more specific class."""


class TraceFormatError(FuseprofError):
    """An input file that is not a readable trace of the kind its name says."""


class NotATraceError(TraceFormatError):
    """Valid JSON that holds no trace at all (no 'traceEvents'): given by name, an error; found in a folder of
    traces (a label file, a config), skipped with a warning."""


class BundleError(FuseprofError):
    """A bundle path that is missing, incomplete or not a fuseprof bundle."""


class FuseprofWarning(UserWarning):
    """Data that is still usable but incomplete; the CLI prints it as one line naming the file."""


# The optional packages fuseprof imports, by top-level module, and the extra of pyproject.toml that installs each.
# The core install reads and analyses traces; everything else is one of these extras.
EXTRA_OF_MODULE = {
    "torch": "capture", "triton": "capture", "pynvml": "capture", "ncu_report": "capture",
    "streamlit": "dashboard", "duckdb": "interop", "perfetto": "interop", "dask": "dask", "distributed": "dask",
}


class MissingExtraError(FuseprofError):
    """An optional package this install lacks; the message names the extra that brings it."""

    def __init__(self, module: str, needed_for: str, otherwise: str = "") -> None:
        extra = EXTRA_OF_MODULE.get(module.split(".")[0], "all")
        super().__init__(f"{needed_for} needs {module}, which this install lacks: pip install 'fuseprof[{extra}]'"
                         + (f" ({otherwise})" if otherwise else ""))
        self.module, self.extra = module, extra


def missing_extra(exc: ModuleNotFoundError, needed_for: str) -> MissingExtraError | None:
    """The one-line error for an import of an optional package that failed, or None when the missing module is
    none of fuseprof's optional packages (a user's own import: that error is the user's to see)."""
    top = (exc.name or "").split(".")[0]
    return MissingExtraError(top, needed_for) if top in EXTRA_OF_MODULE else None


def out_of_memory(doing: str) -> FuseprofError:
    """The one line for a MemoryError, naming the bound the process ran into: its address-space or data limit
    (``ulimit -v``/``-d``, RLIMIT_AS/RLIMIT_DATA: the smaller, in GiB) where one is set, else the machine's memory
    (a MemoryError without a limit means the kernel refused to commit more)."""
    try:
        import resource

        limits = [(resource.getrlimit(kind)[0], flag) for kind, flag in ((resource.RLIMIT_AS, "-v"),
                                                                        (resource.RLIMIT_DATA, "-d"))]
        limit, flag = min((lim, flag) for lim, flag in limits if lim != resource.RLIM_INFINITY)
        bound = f"this process's memory limit, {limit / 2**30:,.1f} GiB (ulimit {flag})"
    except (ImportError, ValueError):  # no resource module (Windows), or no limit set
        bound = "the memory the machine has free"
    return FuseprofError(f"{doing}: out of memory: it outgrew {bound}; read fewer traces at once, a --window of "
                         "fewer steps, or run where more memory is free")
