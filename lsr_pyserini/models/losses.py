"""Losses shared by the families: contrastive (in-batch + hard negatives), MarginMSE, FLOPS.

Scores are a (B queries x B*G documents) matrix: the batch's documents come in groups of G, the
positive first then G-1 hard negatives, and group j belongs to query j.

sentence-transformers' SPLADE losses (SpladeLoss, FlopsLoss, SparseMarginMSELoss) are bound to a
SparseEncoder instance and its trainer; TILDE's BiQDL and TILDEv2's exact-match scores are not
SparseEncoders, so the few lines each loss needs live here, once, for every family.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F


def own_groups(scores: torch.Tensor, group_size: int) -> torch.Tensor:
    """(B x G) scores of each query against its own group only."""
    queries = scores.shape[0]
    index = torch.arange(queries, device=scores.device)
    return scores.view(queries, queries, group_size)[index, index]


def contrastive_loss(scores: torch.Tensor, group_size: int, in_batch: bool = True) -> torch.Tensor:
    """InfoNCE with the positive against every other document of the batch (in-batch + hard
    negatives), or, with `in_batch=False`, against its own group's hard negatives only
    (localised contrastive estimation)."""
    if in_batch:
        labels = torch.arange(scores.shape[0], device=scores.device) * group_size
        return F.cross_entropy(scores, labels)
    own = own_groups(scores, group_size)
    return F.cross_entropy(own, torch.zeros(own.shape[0], dtype=torch.long, device=scores.device))


def margin_mse(scores: torch.Tensor, teacher: torch.Tensor, group_size: int) -> torch.Tensor:
    """MSE between the student's and the teacher's margins (positive minus each hard negative)."""
    own = own_groups(scores, group_size)
    return F.mse_loss(own[:, :1] - own[:, 1:], teacher[:, :1] - teacher[:, 1:])


def with_margin_mse(loss: torch.Tensor, logs: dict, scores: torch.Tensor, teacher, group_size: int,
                    weight: float) -> torch.Tensor:
    """``loss`` plus ``weight`` x MarginMSE against the batch's teacher scores (logged as 'mse'),
    or ``loss`` unchanged when the batch has no teacher."""
    if teacher is None:
        return loss
    distil = margin_mse(scores, torch.tensor(teacher, device=scores.device), group_size)
    logs["mse"] = float(distil.detach())
    return loss + weight * distil


def flops(representations: torch.Tensor) -> torch.Tensor:
    """SPLADE's FLOPS regulariser: sum over terms of the squared mean activation in the batch."""
    return torch.sum(torch.mean(torch.abs(representations), dim=0) ** 2)


def quadratic_warmup(weight: float, step: int, warmup_steps: int) -> float:
    """The regulariser weight grows as (step / warmup_steps)^2 until it reaches `weight`."""
    if warmup_steps <= 0:
        return weight
    return weight * min(1.0, step / warmup_steps) ** 2
