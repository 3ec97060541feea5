"""TILDE's settings, declared once (expansion, TILDE-QL re-ranking and BiQDL training)."""
from __future__ import annotations

from ...core.declarations import Schema
from ..registry import family
from ..shared_settings import DOC_MAX_LENGTH, MODEL, QUERY_MAX_LENGTH

SCHEMA = family(Schema("tilde", (MODEL, DOC_MAX_LENGTH, QUERY_MAX_LENGTH)))
