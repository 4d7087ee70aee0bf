"""``fuseprof run SCRIPT [ARGS...]``: capture a program of your own, marked with ``fuseprof.region``.

The script runs once in this process under torch.profiler (``record_shapes``, ``with_stack`` and ``with_modules``
on), as ``python SCRIPT ARGS`` would run it; the regions it entered name the variants of the
bundle's rows. On a GPU it then runs again as a child of ncu, which profiles only the kernels inside
those regions (their NVTX ranges). One bundle holds both, and ``fuseprof analyze`` reads it like any
whole-model trace.
"""

from __future__ import annotations

import contextlib
import os
import runpy
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import pandas as pd

from fuseprof.bundle.files import BundleWriter, remove_unfinished
from fuseprof.bundle.provenance import bundle_name, command_line, git_state, now_utc, versions
from fuseprof.capture.ncu_capture import capture_with_ncu
from fuseprof.capture.torch_profile import (
    add_unprofiled,
    between_ns,
    clock_mark,
    export_gzipped_trace,
    profiled,
    timing_method,
)
from fuseprof.case import user_frame
from fuseprof.console import Log, log_to_stderr, verbatim
from fuseprof.errors import CaseNotFoundError, InvalidArgumentError, NcuError
from fuseprof.parse.chrome_trace import read_chrome_trace
from fuseprof.parse.ncu_csv import read_ncu_csv
from fuseprof.ranges import REGION, region_label


@dataclass
class RunOptions:
    script: Path
    args: list[str] = field(default_factory=list)
    out_dir: Path = Path("traces")
    name: str | None = None
    ncu: bool = True
    tensor_precisions: tuple[str, ...] = ("bf16", "fp16")
    ncu_timeout_s: float = 1800.0
    unprofiled_steps: int = 0


def _end_a_forked_child(owner: int, code: object) -> None:
    """In a process the script forked (``os.fork``), the script's end is that process's end: it exits with the
    script's status at once, never running on into fuseprof's capture (which would write a second bundle and
    wait on locks the fork copied held). In the script's own process, nothing."""
    if os.getpid() == owner:
        return
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code if isinstance(code, int) else 0 if code is None else 1)


def _run_script(opts: RunOptions) -> None:
    """``python SCRIPT ARGS`` in this process; an exception in it is one line with its file and line. Whatever the
    script does to the process's directory is undone when it ends (the bundle's paths are relative to it), and an
    ``os._exit`` in the script's own process, which skips every clean-up, first removes the bundle being written
    (``_exiting_cleans_up``)."""
    saved_argv, saved_path, saved_cwd = sys.argv, list(sys.path), os.getcwd()
    sys.argv = [str(opts.script), *opts.args]
    sys.path.insert(0, str(opts.script.resolve().parent))
    owner = os.getpid()
    try:
        with verbatim(), _exiting_cleans_up(owner):  # the user's own script prints what it likes (its colours too)
            runpy.run_path(str(opts.script), run_name="__main__")
        _end_a_forked_child(owner, 0)
    except SystemExit as exc:
        _end_a_forked_child(owner, exc.code)
        if exc.code not in (None, 0):
            raise InvalidArgumentError(f"{opts.script}: exited with status {exc.code}") from None
    except Exception as exc:
        if os.getpid() != owner:
            traceback.print_exc()
            _end_a_forked_child(owner, 1)
        raise CaseNotFoundError(f"{user_frame(exc, str(opts.script))}: {type(exc).__name__}: {exc} "
                                f"(in {opts.script})") from None
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
        if os.getpid() == owner:
            os.chdir(saved_cwd)


@contextlib.contextmanager
def _exiting_cleans_up(owner: int) -> Iterator[None]:
    """While the script runs, ``os._exit`` in this process removes the half-written bundle before it ends the
    process as asked (the status and the abruptness kept: no finally block or atexit runs, as the script meant);
    in a process the script forked it is ``os._exit`` itself (the parent's bundle is not the child's to remove)."""
    real_exit = os._exit

    def exit_removing_partials(status: int) -> NoReturn:
        if os.getpid() == owner:
            remove_unfinished()
            print(f"fuseprof: the script ended the process with os._exit({status}); no bundle written", file=sys.stderr)
            sys.stderr.flush()
        real_exit(status)

    os._exit = exit_removing_partials
    try:
        yield
    finally:
        os._exit = real_exit


class StepMarks:
    """What ``fuseprof.step()`` does while ``fuseprof run`` runs the script. With ``unprofiled`` steps asked for, the
    profiler is not on yet: the first call marks where timing begins and each of the next ``unprofiled`` calls ends
    one step timed whole (a CUDA event recorded as the loop runs, no synchronisation, read when the last is reached;
    the host's clock on a CPU); then the profiler starts, with those times in its trace (``add_unprofiled``), and
    every later call ends one ``ProfilerStep``. Without, the profiler runs from the start and a call is its step."""

    def __init__(self, unprofiled: int, cuda: bool, start: Callable[[], Any]) -> None:
        self.unprofiled, self.cuda, self._start = unprofiled, cuda, start
        self.marks: list[Any] = []
        self.step_ns: list[int] = []
        self.prof: Any = None
        self.traced = 0  # the steps ended under the profiler

    def start(self) -> None:
        self.prof = self._start()
        if self.step_ns:
            add_unprofiled(self.prof, self.step_ns, timing_method(self.cuda))

    def __call__(self) -> None:
        if self.prof is not None:
            self.prof.step()
            self.traced += 1
            return
        self.marks.append(clock_mark(self.cuda))
        if len(self.marks) == self.unprofiled + 1:
            self.step_ns = between_ns(self.marks, self.cuda)
            self.start()

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        """``fuseprof.step()`` calls this object while the block runs."""
        from fuseprof import regions

        regions._on_step = self
        try:
            yield
        finally:
            regions._on_step = None


def _trace_script(opts: RunOptions, raw: Path, cuda: bool) -> tuple[Any, list[int]]:
    """The script run once, under the profiler from its start or, with ``--unprofiled-steps``, from the step after
    the timed ones (``StepMarks``); the profiler and the un-profiled step times."""
    import torch

    options: dict[str, Any] = {"record_shapes": True, "with_stack": True, "with_modules": True}
    if opts.unprofiled_steps:  # every step recorded, and named ProfilerStep#N as a scheduled profiler names them
        options["schedule"] = lambda _step: torch.profiler.ProfilerAction.RECORD
    with contextlib.ExitStack() as tracing:
        marks = StepMarks(opts.unprofiled_steps, cuda, lambda: tracing.enter_context(profiled(raw, cuda, **options)))
        if not opts.unprofiled_steps:
            marks.start()
        with marks.installed():
            _run_script(opts)
        if opts.unprofiled_steps and not marks.traced:  # nothing but the script's tail would be traced
            raise InvalidArgumentError(
                f"{opts.script}: called fuseprof.step() {len(marks.marks) + marks.traced} "
                f"times; --unprofiled-steps {opts.unprofiled_steps} needs at least {opts.unprofiled_steps + 2} (the "
                "first marks where timing begins, the next K end the timed steps, the rest end traced steps)")
        if cuda:
            torch.cuda.synchronize()
    return marks.prof, marks.step_ns


def run_script(opts: RunOptions, log: Log = log_to_stderr) -> Path:
    """Capture ``opts.script`` into a new bundle and return its path."""
    import torch

    from fuseprof.capture.device_facts import device_facts

    if not opts.script.is_file():
        raise InvalidArgumentError(f"{opts.script}: no such script")
    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    started = time.monotonic()
    manifest: dict[str, Any] = {
        "kind": "run", "case": None, "script": str(opts.script), "args": opts.args, "created_utc": now_utc(),
        "command_line": command_line(), "git": git_state(Path.cwd()), "versions": versions(),
        "device": device_facts(device), "profiler": {"record_shapes": True, "with_stack": True, "with_modules": True},
    }
    name = opts.name or bundle_name(f"run-{opts.script.stem}", manifest["device"]["name"], manifest["created_utc"])
    with BundleWriter(opts.out_dir, name) as writer:
        log(f"fuseprof: running {opts.script} under torch.profiler ({'CUDA' if cuda else 'CPU only'})"
            + (f", its first {opts.unprofiled_steps} steps timed without it" if opts.unprofiled_steps else ""))
        prof, step_ns = _trace_script(opts, writer.raw(""), cuda)
        if step_ns:
            manifest["profiler"]["unprofiled_step_ns"] = step_ns
        kernels = read_chrome_trace(export_gzipped_trace(prof, writer.raw("profiler_trace.json.gz")))
        regions = sorted(kernels["variant"].dropna().unique()) if "variant" in kernels else []
        if not regions:
            raise InvalidArgumentError(f"{opts.script}: entered no fuseprof.region; mark what to measure with "
                                       "`with fuseprof.region(\"name\"):`")
        manifest["regions"] = regions
        log(f"  regions: {', '.join(regions)}; {len(kernels)} rows")
        if opts.ncu and cuda:
            labels = [region_label(r) for r in regions]
            target = [sys.executable, str(opts.script.resolve()), *opts.args]
            try:
                manifest["ncu"] = capture_with_ncu(writer, labels, target, opts.tensor_precisions, opts.ncu_timeout_s,
                                                   log)
                kernels = pd.concat([read_ncu_csv(writer.raw("ncu_raw.csv.gz")), kernels], ignore_index=True)
            except NcuError as exc:
                manifest["ncu"] = {"status": "failed", "error": str(exc)}
        else:
            manifest["ncu"] = {"status": "skipped", "reason": "--no-ncu" if not opts.ncu else "no CUDA GPU"}
        manifest["wall_s"] = round(time.monotonic() - started, 2)
        writer.write_kernels(kernels)
        writer.write_manifest(manifest)
        path = writer.commit()
    log(f"fuseprof: wrote {path} (regions {', '.join(regions)}; shape column '{REGION}')")
    return path
