"""Whole-model trace analysis: pure functions from a trace's event tables to result tables.

``fuseprof.analysis.analyze(path)`` is the facade (one ``TraceAnalysis`` per trace).
"""

from fuseprof.analysis.facts.result import TraceAnalysis
from fuseprof.analysis.running.runner import analyze, analyze_trace

__all__ = ["TraceAnalysis", "analyze", "analyze_trace"]
