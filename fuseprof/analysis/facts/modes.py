"""The most frequent value per group, for every group at once.

``groupby(...).agg(lambda v: v.value_counts().index[0])`` calls pandas once per group: on a trace of 100,000
distinct kernel names that alone took minutes. Here the (group, value) pairs are counted in one pass and the
winner of each group picked by sorting; ties go to the value seen first, as ``value_counts`` orders them."""

from __future__ import annotations

import numpy as np
import pandas as pd


def modes(values: pd.Series, key: pd.Series) -> pd.Series:
    """Per distinct ``key`` (parallel to ``values``): its most frequent non-null value, ties to the one seen
    first; groups whose values are all null, or whose key is null, are absent. Indexed by the keys in the order of
    their winner's (count descending, first seen ascending). Keys and values are numbered once each
    (``pd.factorize``) and every (key, value) pair counted as one integer: a groupby over two text columns would
    hash every text again (the 131 MB bench trace: 400k kernels' names and ops, three times an analysis)."""
    keep = values.notna().to_numpy()
    key_codes, keys = pd.factorize(np.asarray(key.to_numpy())[keep])
    value_codes, found = pd.factorize(values.to_numpy()[keep])
    positions = np.flatnonzero(keep)[key_codes >= 0]  # a null key is no group
    width = max(len(found), 1)  # a pair's number: its key's times this, plus its value's
    pairs = key_codes[key_codes >= 0].astype(np.int64) * width + value_codes[key_codes >= 0]
    pair_codes, distinct = pd.factorize(pairs)
    counts = np.bincount(pair_codes, minlength=len(distinct))
    seen = positions[np.unique(pair_codes, return_index=True)[1]]  # each pair's first row (codes: in that order)
    ranked = np.lexsort((seen, -counts))  # most frequent first, then first seen
    owner = distinct[ranked] // width
    winners = ranked[np.sort(np.unique(owner, return_index=True)[1])]  # each key's first in that order
    index = pd.Index(keys[distinct[winners] // width], name="key")
    return pd.Series(found[distinct[winners] % width], index=index, dtype=object, name="value")
