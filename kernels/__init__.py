"""Kernels under study, one folder per operation (installed as the package ``fuseprof_kernels``).

Each folder keeps the float64 reference, the unfused eager chain, the compiled form and the
fused kernels side by side, and exposes ``CASE`` for ``fuseprof profile <folder name>``.
"""
