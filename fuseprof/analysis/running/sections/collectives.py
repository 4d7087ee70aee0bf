"""A rank's collectives (communication kernels with their bytes and the computation before each): what the
across-ranks section matches between ranks; not shown on its own."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from fuseprof.analysis.facts.collectives import collectives
from fuseprof.analysis.running.sections import Context, Section, Table


def _build(context: Context) -> Mapping[str, pd.DataFrame]:
    return {"collectives": collectives(context.events, context.tables.rank)}


SECTION = Section(
    name="collectives", order=120, build=_build,
    description="Each communication kernel of this rank, its bytes and the computation by category since the "
                "previous one: fuseprof/analysis/facts/collectives.py.",
    tables=(Table("collectives", "Collectives of this rank", shown=False),))
