"""The most frequent value per group, for every group at once.

``groupby(...).agg(lambda v: v.value_counts().index[0])`` calls pandas once per group: on a trace of 100,000
distinct kernel names that alone took minutes. Here the (group, value) pairs are counted in one pass and the
winner of each group picked by sorting; ties go to the value seen first, as ``value_counts`` orders them."""

from __future__ import annotations

import numpy as np
import pandas as pd

from fuseprof.analysis.aggregate import aggregate


def modes(values: pd.Series, key: pd.Series) -> pd.Series:
    """Per distinct ``key`` (parallel to ``values``): its most frequent non-null value, ties to the one seen
    first; groups whose values are all null are absent."""
    keep = values.notna().to_numpy()
    frame = pd.DataFrame({"key": np.asarray(key.to_numpy())[keep], "value": values.to_numpy()[keep],
                          "seen": np.flatnonzero(keep)})
    counted = aggregate(frame.groupby(["key", "value"], sort=False), n=("seen", "size"),
                        seen=("seen", "min")).reset_index()
    best = counted.sort_values(["n", "seen"], ascending=[False, True], kind="stable").drop_duplicates("key")
    return best.set_index("key")["value"].astype(object)
