"""SSR supervised fine-tuning: contrastive loss on the late-interaction score of sparse codes.

Starts from an SSR model folder (`python -m lsr_pyserini.ssr fit`); the backbone stays frozen and
only the two SAEs learn. Score of query q and document d:

    SSR-tok + cls_weight x SSR-CLS = sum_i max_t z_q,i . z_d,t + cls_weight x z_q,CLS . z_d,CLS

where z are the TopK codes (the gradient flows through the kept activations). Loss =
contrastive (in-batch + hard negatives) on score_scale x score + reconstruction_weight x the
normalised reconstruction error of the batch's token and pooled vectors, so the codes stay faithful
to the embeddings, + distill_weight x the KL divergence from the dense MaxSim of the backbone's token
embeddings (the late interaction SSR approximates, computed on the batch: softmax over the batch's
documents of MaxSim as the target distribution, of score_scale x SSR-tok as the student's). Decoder columns are set back to unit norm before every step and at saving.
"""
from __future__ import annotations


import torch

from ...core.errors import InputError
from ...core.options import non_negative_float, positive_float
from .backbone import TokenEncoder
from .sae import SSRModel, late_interaction, normalised_mse, padded_codes  # noqa: F401 (late_interaction: its old place)
from ...core.declarations import Schema, Setting
from ..registry import trainer
from ..base import Batch
from ..losses import contrastive_loss


TRAINING = Schema("ssr training", (
    Setting("reconstruction_weight", 1.0, "weight of the SAEs' normalised reconstruction error", non_negative_float),
    Setting("score_scale", 1.0, "scores are multiplied by this before the softmax", positive_float),
    Setting("tokens", None, "token store of the corpus (`ssr embed`, same backbone): documents' embeddings are read "
                            "from it instead of running the frozen backbone again; none = run the backbone",
            nullable=True),
    Setting("distill_weight", 0.0, "weight of the KL divergence from the batch's dense MaxSim ranking (0 = off)",
            non_negative_float),
    Setting("train_cls_weight", None, "weight of the [CLS] code similarity in the trained score; none = the model's "
                                      "cls_weight", non_negative_float, nullable=True)))

def dense_maxsim(queries, query_keep, documents, doc_keep) -> torch.Tensor:
    """B x D matrix of sum_i max_t x_q,i . x_d,t over the kept (ordinary) tokens of both sides."""
    similarities = torch.einsum("bid,ntd->bint", queries, documents)
    similarities = similarities.masked_fill(~doc_keep[None, None], float("-inf")).amax(-1)
    return similarities.masked_fill(~query_keep[:, :, None], 0.0).nan_to_num(0.0, neginf=0.0).sum(1)


class SSRFamily(torch.nn.Module):
    # the frozen backbone's outputs and the token store's rows are moved to the SAEs' device (train/loop.py)
    device_ready = True

    def __init__(self, base: str | None, args):
        super().__init__()
        if not base:
            raise InputError("train ssr: --base must be an SSR model folder (from `python -m lsr_pyserini.ssr fit`)")
        model = SSRModel.load(base)
        self.ssr = model
        self.token_sae, self.cls_sae = model.token_sae.train(), model.cls_sae.train()
        self.backbone = TokenEncoder(**model.backbone)
        for parameter in self.backbone.model.parameters():
            parameter.requires_grad_(False)
        self.args = args
        self.cls_weight = model.settings["cls_weight"] if args.train_cls_weight is None else args.train_cls_weight
        self.tokens = None
        if args.tokens:
            from ...stores.tokens import TokenRows

            self.tokens = TokenRows(args.tokens, "tokens")
            if self.tokens.manifest["backbone"] != model.backbone:
                raise InputError(f"{args.tokens}: token store of another backbone than {base}'s")

    def stored(self, docids: list[str]):
        """(pooled, padded tokens, keep) of documents from the token store."""
        bounds, arrays = self.tokens.gather(docids, ["tokens"])
        lengths = torch.as_tensor(bounds[1:] - bounds[:-1])
        keep = torch.arange(max(int(lengths.max()), 1))[None, :] < lengths[:, None]
        tokens = torch.zeros(*keep.shape, self.token_sae.input_dim)
        tokens[keep] = torch.as_tensor(arrays["tokens"], dtype=torch.float32)
        pooled = torch.as_tensor(self.tokens.document_rows(docids, "pooled"), dtype=torch.float32)
        return pooled, tokens, keep

    def side(self, texts: list[str], side: str, ids: list[str] | None = None):
        with torch.no_grad():
            if self.tokens is not None and side == "documents":
                pooled, tokens, keep = self.stored(ids)
            else:
                pooled, tokens, keep = self.backbone.forward(texts, side)
        device = self.token_sae.W_enc.device
        if device.type != "cpu":
            pooled, tokens, keep = pooled.to(device), tokens.to(device), keep.to(device)
        index, value, decoded = padded_codes(self.token_sae, tokens, keep)
        cls_index, cls_value = self.cls_sae.encode(pooled)
        cls_dense = self.cls_sae.dense_codes(cls_index, cls_value)
        error = normalised_mse(tokens[keep], decoded)[0] + normalised_mse(pooled, self.cls_sae.decode(cls_index, cls_value))[0]
        return (index, value), cls_dense, error, (tokens, keep)

    def loss(self, batch: Batch, step: int):
        self.token_sae.normalize_decoder()
        self.cls_sae.normalize_decoder()
        query_codes, query_cls, query_error, query_dense = self.side(batch.queries, "queries")
        doc_codes, doc_cls, doc_error, doc_dense = self.side(batch.documents, "documents", batch.document_ids)
        scores, token_scores = self.ssr.score((query_codes, query_cls), (doc_codes, doc_cls), self.cls_weight)
        ranking = contrastive_loss(self.args.score_scale * scores, batch.group_size)
        reconstruction = (query_error + doc_error) / 2
        loss = ranking + self.args.reconstruction_weight * reconstruction
        logs = {"rank": float(ranking.detach()), "nmse": float(reconstruction.detach())}
        if self.args.distill_weight:
            teacher = dense_maxsim(*query_dense, *doc_dense).log_softmax(-1)
            student = (self.args.score_scale * token_scores).log_softmax(-1)
            distill = torch.nn.functional.kl_div(student, teacher, log_target=True, reduction="batchmean")
            loss = loss + self.args.distill_weight * distill
            logs["kl"] = float(distill.detach())
        return loss, logs

    def save(self, folder) -> None:
        self.token_sae.normalize_decoder()
        self.cls_sae.normalize_decoder()
        training = {**self.ssr.training, "supervised": {k: v for k, v in vars(self.args).items()
                                                        if isinstance(v, (int, float, str, type(None)))}}
        SSRModel(self.ssr.backbone, self.token_sae, self.cls_sae, self.ssr.settings, training).save(folder)


@trainer("ssr", TRAINING, default_base="")  # no default: an SSR model folder from `ssr fit` is required
def build(base: str | None, args) -> SSRFamily:
    """SSR: fine-tune the token and [CLS] SAEs of an SSR model (contrastive on code late interaction)."""
    return SSRFamily(base, args)

