"""SSR's settings, declared once: the encoder's (SCHEMA: the backbone's location, the writer's scales
and the retrieval settings an SSR model folder records in its `lsr_family.json`, like every family's
checkpoint), the retrieval settings alone (RETRIEVAL: the ones `ssr fit` sets) and how `ssr fit`
trains its two SAEs (FIT). The flags of `ssr fit` are generated from RETRIEVAL and FIT.

A folder written before kept the retrieval settings in an `ssr_config.json` of its own: it still
loads to the same settings (`sae.old_folder_settings`)."""
from __future__ import annotations

from ...core.options import non_negative_float, positive_float, positive_int, random_seed
from ...core.declarations import Schema, Setting
from ..registry import family
from ..shared_settings import IMPACT_SCALE, QUERY_IMPACT_SCALE, SPARSE_COMMON

RETRIEVAL = Schema("ssr model", (
    Setting("query_term_budget", 256, "retrieval setting stored in the model: adaptive K, a query of n tokens keeps "
                                      "budget / n neurons per token ...", positive_int),
    Setting("query_k_min", 4, "retrieval setting stored in the model: ... but at least this many (and at most the "
                              "token SAE's K)", positive_int),
    Setting("cls_terms", True, "retrieval setting stored in the model: also write the [CLS] code as pseudo-terms "
                               "c<n> (first stage)"),
    Setting("cls_weight", 1.0, "retrieval setting stored in the model: SSR-CLS = SSR-tok + cls_weight x "
                               "z_q[CLS] . z_d[CLS]", non_negative_float)))

SCHEMA = family(Schema("ssr", SPARSE_COMMON + (
    Setting("backbone", None, "another location of the backbone the SSR model records; none = the recorded one",
            nullable=True),) + tuple(  # the model's own unless given: `--encoder ssr --model DIR` encodes as DIR says
    setting.but(default=None, nullable=True, choices=(True, False) if setting.is_bool else setting.choices,
                help=setting.help.replace("retrieval setting stored in the model", "retrieval setting") +
                "; none = the SSR model's") for setting in RETRIEVAL.settings)).extended("ssr", replace=[
    IMPACT_SCALE.but(help="document impact = round(max activation x impact_scale)"),
    QUERY_IMPACT_SCALE.but(default=20, help="query impact = round(summed activation x query_impact_scale)")]))

FIT = Schema("ssr fit", (
    Setting("latents", 4096, "token SAE latents h (paper: 16384)", positive_int),
    Setting("k", 32, "token SAE active latents K (as the paper)", positive_int),
    Setting("cls_latents", 1024, "[CLS] SAE latents", positive_int),
    Setting("cls_k", 32, "[CLS] SAE active latents", positive_int),
    Setting("steps", 300, "token SAE optimiser steps", positive_int),
    Setting("cls_steps", 400, "[CLS] SAE optimiser steps", positive_int),
    Setting("batch_size", 2048, "token vectors per step", positive_int),
    Setting("cls_batch_size", 256, "pooled vectors per step", positive_int),
    Setting("lr", 1e-3, "Adam learning rate", positive_float),
    Setting("aux_k", 256, "latents in the dead-latent auxiliary loss", positive_int),
    Setting("aux_weight", 1 / 32, "auxiliary loss weight", non_negative_float),
    Setting("dead_after", 200_000, "a latent is dead after this many inputs without firing", positive_int),
    Setting("seed", 0, "random seed", random_seed)))
