"""Tables over capture bundles (``fuseprof profile``/``bench``): per-variant summary, comparison with
the copy baseline, savings of fusion and the per-variant breakdown of a layer."""
