"""TILDE training with the bi-directional query/document likelihood loss (BiQDL).

For each (query, relevant passage) pair, the passage's first-position logits are trained with
binary cross-entropy to predict which vocabulary terms occur in the query (query likelihood),
and the query's to predict the passage's terms (document likelihood). Stop words, punctuation and
special tokens are excluded from the targets; the loss is normalised by the number of valid terms.
Only each group's positive is used: BiQDL needs no negatives. Two options beyond the paper, for
small training sets: `--balanced` (present and absent terms averaged separately) and
`--passage-terms-weight` (every passage of the batch, negatives included, also predicts its own terms).
"""
from __future__ import annotations


import torch
import torch.nn.functional as F

from ...core.hf import write_family
from ...core.options import non_negative_float
from .model import TildeModel, query_likelihoods
from ...core.declarations import Schema, Setting
from ..registry import trainer
from ..base import Batch
from ..losses import contrastive_loss


TRAINING = Schema("tilde training", (
    Setting("balanced", False, "average the binary cross-entropy of the present terms and of the absent ones "
                               "separately, then add them (default: one mean over the vocabulary, as TILDE; with a few "
                               "hundred training pairs the ~10 present terms of ~30,000 barely count)"),
    Setting("passage_terms_weight", 0.0, "add this weight x the loss of every passage of the batch predicting its own "
                                         "terms (self-supervision from the corpus, beyond BiQDL; 0 = BiQDL only)",
            non_negative_float),
    Setting("ranking_weight", 0.0, "add this weight x the contrastive loss of the TILDE-QL scores (sum over the query's "
                                   "terms of log P(q_i|d)): each query's positive against its hard negatives and the "
                                   "batch's other passages (beyond BiQDL; 0 = BiQDL only)", non_negative_float)))

class TildeFamily(torch.nn.Module):
    device_ready = True  # the model moves its batches (models/tilde/model.py); targets and counts are moved here

    def __init__(self, base: str, args):
        super().__init__()
        self.tilde = TildeModel(base, args.doc_max_length, args.query_max_length)
        self.model = self.tilde.model  # registers the parameters with this module
        valid = torch.ones(self.tilde.vocab_size, dtype=torch.bool)
        valid[self.tilde.excluded_ids] = False
        self.register_buffer("valid", valid, persistent=False)
        self.balanced = bool(getattr(args, "balanced", False))
        self.passage_terms_weight = float(getattr(args, "passage_terms_weight", 0.0) or 0.0)
        self.ranking_weight = float(getattr(args, "ranking_weight", 0.0) or 0.0)

    def targets(self, texts: list[str], side: str) -> torch.Tensor:
        """B x |V| 0/1 labels of the texts' terms, built on the CPU, on the model's device."""
        labels = torch.zeros(len(texts), self.tilde.vocab_size)
        for row, text in enumerate(texts):
            labels[row, self.tilde.token_ids(text, side)] = 1.0
        return labels.to(self.valid.device)

    def likelihood_loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        losses = F.binary_cross_entropy_with_logits(logits, labels, reduction="none") * self.valid
        if not self.balanced:
            return losses.sum(1).mean() / self.valid.sum()
        present = labels * self.valid
        absent = (1 - labels) * self.valid
        return ((losses * present).sum(1) / present.sum(1).clamp(min=1)
                + (losses * absent).sum(1) / absent.sum(1).clamp(min=1)).mean()

    def query_likelihoods(self, queries: list[str], logits: torch.Tensor) -> torch.Tensor:
        """B queries x N passages TILDE-QL scores (`query_likelihoods`, as the re-ranker scores)."""
        return query_likelihoods(self.tilde.term_counts(queries).to(logits.device), F.logsigmoid(logits))

    def loss(self, batch: Batch, step: int):
        every_passage = bool(self.passage_terms_weight or self.ranking_weight)  # negatives too, not only positives
        logits = self.tilde.first_logits(batch.documents if every_passage else batch.documents[:: batch.group_size],
                                         "documents")
        positives = logits[:: batch.group_size] if every_passage else logits
        passages = batch.documents[:: batch.group_size]
        query_likelihood = self.likelihood_loss(positives, self.targets(batch.queries, "queries"))
        document_likelihood = self.likelihood_loss(self.tilde.first_logits(batch.queries, "queries"),
                                                   self.targets(passages, "documents"))
        loss = (query_likelihood + document_likelihood) / 2
        logs = {"ql": float(query_likelihood.detach()), "dl": float(document_likelihood.detach())}
        if self.passage_terms_weight:
            own_terms = self.likelihood_loss(logits, self.targets(batch.documents, "documents"))
            loss = loss + self.passage_terms_weight * own_terms
            logs["own"] = float(own_terms.detach())
        if self.ranking_weight:
            ranking = contrastive_loss(self.query_likelihoods(batch.queries, logits), batch.group_size)
            loss = loss + self.ranking_weight * ranking
            logs["rank"] = float(ranking.detach())
        return loss, logs

    def save(self, folder) -> None:
        self.model.save_pretrained(folder)
        self.tilde.tokenizer.save_pretrained(folder)
        write_family(folder, "tilde")


@trainer("tilde", TRAINING, model_settings=("doc_max_length", "query_max_length"))
def build(base: str, args) -> TildeFamily:
    """TILDE: BERT masked-LM token likelihoods, trained with BiQDL (for expansion and TILDE-QL)."""
    return TildeFamily(base, args)

