"""The vocabulary projection of masked-LM families (SPLADE, SparseEmbed), written once.

The projection (|V| x hidden) dominates a small model's cost. Instead of materialising the
batch x length x |V| logits and pooling them afterwards, the model runs up to the input of its
output-embedding layer (`HeadStop`), and `vocabulary_maxima` projects one vocabulary slice at a
time, reducing over positions while the slice is in cache. Training, encoding and the fast paths
(`kernels/fastpath.py`, `kernels/int8.py`) all call these.
"""
from __future__ import annotations

import torch

VOCAB_SLICE = 4096  # rows of the output embedding projected at once (~16 MiB of logits per 256 tokens)


class _HeadInput(Exception):
    """Raised by the hook to stop the forward pass at the output-embedding layer."""

    def __init__(self, hidden: torch.Tensor):
        self.hidden = hidden


class HeadStop:
    """A masked LM run up to its output-embedding layer: calling it with a tokenizer batch returns
    what that layer would read (batch x length x hidden, with gradient when enabled), the projection
    itself never running. The stopping hook is there only during the call: the model's own forward
    pass (full logits) works as ever."""

    def __init__(self, mlm):
        self.mlm = mlm

    @staticmethod
    def _stop(_module, inputs):
        raise _HeadInput(inputs[0])

    def __call__(self, encoded) -> torch.Tensor:
        hook = self.mlm.get_output_embeddings().register_forward_pre_hook(self._stop)
        try:
            self.mlm(**encoded)
        except _HeadInput as stop:
            return stop.hidden
        finally:
            hook.remove()
        raise RuntimeError("the model never reached its output-embedding layer")


def take_rows(table: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """`table[ids]` (rows of a weight matrix; a vector's entries) with a backward that repeats bit
    for bit: indexing's backward adds the repeated rows' gradients in an order that varies between
    runs at 2 or more threads (torch 2.13 on CPU), an embedding lookup's adds them in the order the
    ids come, as indexing does at one thread."""
    if table.dim() == 1:
        return torch.nn.functional.embedding(ids, table.unsqueeze(1)).squeeze(-1)
    return torch.nn.functional.embedding(ids, table)


def vocabulary_maxima(states: torch.Tensor, weight: torch.Tensor, padding: torch.Tensor | None = None,
                      positions: bool = False):
    """max over positions (the second-last dimension of `states`: length x hidden, or batch x length
    x hidden) of `states @ weight.T`, bias not added, one slice of VOCAB_SLICE rows at a time;
    `padding` (same leading shape, a trailing 1) marks positions left out. With `positions`, also
    where each maximum is (argmax over positions)."""
    values, where = [], []
    for start in range(0, weight.shape[0], VOCAB_SLICE):
        logits = states @ weight[start:start + VOCAB_SLICE].T
        if padding is not None:
            logits = logits.masked_fill_(padding, float("-inf"))
        if positions:
            best, at = logits.max(dim=-2)
            values.append(best)
            where.append(at)
        else:
            values.append(logits.amax(dim=-2))
    if positions:
        return torch.cat(values, dim=-1), torch.cat(where, dim=-1)
    return torch.cat(values, dim=-1)


def vocabulary_sums(states: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """sum over positions (length x hidden) of log(1 + ReLU(states @ weight.T + bias)), one slice at a
    time (SPLADE v1's pooling; the activation comes before the sum, so the bias is added here)."""
    parts = []
    for start in range(0, weight.shape[0], VOCAB_SLICE):
        logits = states @ weight[start:start + VOCAB_SLICE].T
        logits += bias[start:start + VOCAB_SLICE]
        parts.append(torch.log1p(torch.relu(logits)).sum(0))
    return torch.cat(parts)
