"""Findings written where people already look: an annotated Chrome/Perfetto trace (``chrome``, ``pftrace``)
and SQL over the analysis tables (``sql``). Reads the analysis; nothing reads this package back."""
