"""SSR's encoder settings, declared once (the backbone and the SAEs' settings are the SSR model
folder's own `ssr_config.json`)."""
from __future__ import annotations

from ...core.settings import Schema, Setting
from ..registry import family
from ..settings import IMPACT_SCALE, QUERY_IMPACT_SCALE, SPARSE_COMMON

SCHEMA = family(Schema("ssr", SPARSE_COMMON + (
    Setting("backbone", None, "another location of the backbone the SSR model records; none = the recorded one",
            nullable=True),)).extended("ssr", replace=[
    IMPACT_SCALE.but(help="document impact = round(max activation x impact_scale)"),
    QUERY_IMPACT_SCALE.but(default=20, help="query impact = round(summed activation x query_impact_scale)")]))
