"""Whole-model trace analysis: pure functions from a trace's event tables to result tables.

``fuseprof.analysis.analyze(path)`` is the facade (one ``TraceAnalysis`` per trace).
"""

from fuseprof.analysis.result import TraceAnalysis
from fuseprof.analysis.runner import analyze, analyze_trace

__all__ = ["TraceAnalysis", "analyze", "analyze_trace"]
