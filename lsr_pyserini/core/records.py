"""Encoder records in today's names: a checkpoint's family marker (`lsr_family.json`) or a dense
store's manifest written under a name since given up still reads as what it meant.

    family "transformer"   -> "dense"          (the dense family, named for what it is)
    dense "pooling"        -> "pooling_mode"   (cls/mean, as sentence-transformers names it; SPLADE's
                                                `pooling` is max/sum)

Nothing is rewritten on disk: the record is read in today's names each time it is opened.
"""
from __future__ import annotations

FORMER_FAMILIES = {"transformer": "dense"}
FORMER_SETTINGS = {"dense": {"pooling": "pooling_mode"}}


def current_family(name):
    """A family's name of today (an unknown or None name as it is)."""
    return FORMER_FAMILIES.get(name, name) if isinstance(name, str) else name


def current_settings(family, settings: dict) -> dict:
    """`settings` of `family` with each former setting name as today's (today's wins where both are)."""
    renamed = FORMER_SETTINGS.get(current_family(family), {})
    if not renamed or not isinstance(settings, dict):
        return settings
    return {renamed.get(key, key): value for key, value in settings.items()
            if not (key in renamed and renamed[key] in settings)}


def current_record(record):
    """An encoder record ({"family": ..., settings...}, or a marker with its settings under "config")
    in today's names; anything without a family as it is."""
    if not isinstance(record, dict) or "family" not in record:
        return record
    family = current_family(record["family"])
    updated = {**current_settings(family, record), "family": family}
    if isinstance(record.get("config"), dict):
        updated["config"] = current_settings(family, record["config"])
    return updated


# command-line flags of before, kept hidden beside today's: (former flag, today's setting)
FORMER_FLAGS = {"dense": (("--pooling", "pooling_mode"),)}


def add_former_flags(parser, family: str) -> None:
    """`family`'s flags of before on `parser` (e.g. `encode dense --pooling mean`), hidden from
    --help, each setting today's setting (whose own flag, declared, is the one documented)."""
    import argparse

    for flag, setting in FORMER_FLAGS.get(family, ()):
        parser.add_argument(flag, dest=setting, default=argparse.SUPPRESS, help=argparse.SUPPRESS)
