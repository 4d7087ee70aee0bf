"""A trace verb's process: NumPy's OpenBLAS loaded with one thread, the collector's first threshold raised while the
verb runs, and both put back after (``fuseprof.console.trace_verb_settings``, called by ``fuseprof.cli``)."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys

import pytest

from fuseprof.console import BLAS_THREAD_VARIABLES, FIRST_GENERATION_THRESHOLD, trace_verb_settings
from tests.conftest import FIXTURES, ROOT

TRACE = FIXTURES / "thirdparty" / "h100_bert_small_uncased.json.gz"
# the process's threads but Arrow's jemalloc one (pyarrow starts it): the main thread and OpenBLAS's
_THREADS = ("len([t for t in os.listdir('/proc/self/task')\n"
            "     if open(f'/proc/self/task/{t}/comm').read().strip() != 'jemalloc_bg_thd'])")
# after the verb: its exit status, whether NumPy is loaded, the threads, the variable, the first threshold
_AFTER = ("import contextlib, gc, json, os, sys\nfrom fuseprof.cli import main\n"
          "with open(os.devnull, 'w') as sink, contextlib.redirect_stdout(sink):\n"
          "    code = main(['analyze', sys.argv[1], '--format', 'json'])\n"
          "print(json.dumps([code, 'numpy' in sys.modules, " + _THREADS + ",\n"
          "                  os.environ.get('OPENBLAS_NUM_THREADS'), gc.get_threshold()[0]]))")
_NUMPY_ALONE = "import os, numpy\nprint(" + _THREADS + ")"


def _run(code: str, **env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if k not in BLAS_THREAD_VARIABLES}
    done = subprocess.run([sys.executable, "-c", code, str(TRACE)], capture_output=True, text=True, cwd=ROOT,
                          env={**clean, "FUSEPROF_CACHE": "off", **env}, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads in /proc (Linux)")
def test_the_verb_loads_openblas_with_one_thread_and_leaves_the_process_as_it_was() -> None:
    code, numpy_loaded, threads, variable, threshold = json.loads(_run(_AFTER))
    assert code == 0 and numpy_loaded
    assert threads == 1  # the store is off: no writer thread; OpenBLAS started none
    assert variable is None and threshold == gc.get_threshold()[0] < FIRST_GENERATION_THRESHOLD  # put back
    if (os.cpu_count() or 1) > 1:  # NumPy loaded without the verb starts a thread per core: what the count is
        assert int(_run(_NUMPY_ALONE)) == min(os.cpu_count() or 1, 64)


def test_a_count_the_user_chose_is_theirs(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in BLAS_THREAD_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "4")
    monkeypatch.delitem(sys.modules, "numpy")  # as before any import: only the variables decide
    restore = trace_verb_settings()
    try:
        assert "OPENBLAS_NUM_THREADS" not in os.environ and os.environ["OMP_NUM_THREADS"] == "4"
    finally:
        restore()
    assert os.environ["OMP_NUM_THREADS"] == "4"


def test_unset_it_is_one_thread_while_the_verb_runs_and_unset_after(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in BLAS_THREAD_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.delitem(sys.modules, "numpy")
    before = gc.get_threshold()
    restore = trace_verb_settings()
    try:
        assert os.environ["OPENBLAS_NUM_THREADS"] == "1"
        assert gc.get_threshold() == (max(before[0], FIRST_GENERATION_THRESHOLD), *before[1:])
    finally:
        restore()
    assert "OPENBLAS_NUM_THREADS" not in os.environ and gc.get_threshold() == before


def test_numpy_loaded_already_keeps_its_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in BLAS_THREAD_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    assert "numpy" in sys.modules  # pytest's process: OpenBLAS read its count long ago, setting one says nothing
    restore = trace_verb_settings()
    try:
        assert "OPENBLAS_NUM_THREADS" not in os.environ
    finally:
        restore()
