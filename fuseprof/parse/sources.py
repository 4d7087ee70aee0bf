"""The ``source`` value of each row a parser writes: which tool measured it."""

PROFILER_SOURCE = "torch.profiler"
NCU_SOURCE = "ncu"
