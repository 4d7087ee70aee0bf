"""Closing the loop on the fusion finder: its top chains replayed and fused (``fuseprof fusion --verify``).

replay: recorded aten ops → a runnable program; chains: which chains, and the finder's prediction for each;
run: eager and torch.compile checked and timed into a verify bundle; table: prediction beside realisation.
"""
