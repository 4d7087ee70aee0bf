"""``python -m fuseprof_kernels._cuda``: build verbosely (prints ptxas's resource report)."""

from fuseprof_kernels._cuda import cuda_ops

cuda_ops(verbose=True)
print("fuseprof CUDA ops built")
