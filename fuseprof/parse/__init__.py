"""Raw artifacts (Chrome traces, ncu CSV, .ncu-rep) into rows of the kernel frame."""
