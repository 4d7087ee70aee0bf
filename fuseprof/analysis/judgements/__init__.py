"""What to make of it: fusion chains and patterns, the audit, optimizers, opportunities, advice and the comparison and gate of two runs. Reads the facts and the paths."""
