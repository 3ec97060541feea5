"""TILDE (Zhuang & Zuccon, SIGIR 2021): a BERT masked-LM whose first-position output, projected to
the vocabulary by the MLM head, gives independent token likelihoods P(t|d) = sigmoid(logit_t).

The first token is a marker instead of [CLS]: `[unused0]` (id 1 in BERT's vocabulary) for passages
and `[unused1]` (id 2) for queries, as the published checkpoint (`ielab/TILDE`, a BertLMHeadModel
with `bert.*` and `cls.predictions.*` weights, the same names as BertForMaskedLM) was trained.

Used for document expansion (the top-m predicted tokens that are not stop words, not sub-word
pieces and not already in the passage are appended) and for re-ranking with TILDE-QL
(sum over the query's tokens of log P(q_i|d)), optionally interpolated with the document
likelihood DL (mean over all the passage's tokens of log P(d_i|q), as the TILDE code computes it):
alpha * QL + (1 - alpha) * DL.
"""
from __future__ import annotations

import re
from pathlib import Path

import torch

from ...core.devices import current
from ...core.hf import load_masked_lm, load_tokenizer, read_family
from ...core.presets import model_path
from .config import SCHEMA

# English stop words excluded from expansion, from TILDE-QL query terms and from BiQDL targets.
STOPWORDS = frozenset("""
a about above after again against ain all am an and any are aren as at be because been before being
below between both but by can couldn d did didn do does doesn doing don down during each few for from
further had hadn has hasn have haven having he her here hers herself him himself his how i if in into is
isn it its itself just ll m ma me mightn more most mustn my myself needn no nor not now o of off on once
only or other our ours ourselves out over own re s same shan she should shouldn so some such t than that
the their theirs them themselves then there these they this those through to too under until up ve very
was wasn we were weren what when where which while who whom why will with won wouldn y you your yours
yourself yourselves definition
""".split())
WORD_PIECE = re.compile(r"^[a-z0-9_-]+$")


def query_likelihoods(counts: torch.Tensor, log_likelihoods: torch.Tensor) -> torch.Tensor:
    """TILDE-QL, Q queries x N passages: the sum over each query's terms (repeats counted: `counts`,
    Q x T) of the passage's log P(term | d) (`log_likelihoods`, N x T, over the same T terms). Training
    scores the batch's passages with it, the re-ranker the stored ones."""
    return counts @ log_likelihoods.T


def recorded_lengths(path: str) -> dict:
    """The lengths a TILDE checkpoint trained here records ({} for any other folder or reference)."""
    marker = read_family(path) if Path(path).is_dir() else {}
    config = marker.get("config") if marker.get("family") == "tilde" and isinstance(marker.get("config"), dict) else {}
    return SCHEMA.checked({k: v for k, v in config.items() if k in ("doc_max_length", "query_max_length")},
                          f"checkpoint {path}")


class TildeModel:
    """A TILDE checkpoint with its tokenizer; inference only (training lives in models/tilde/training.py)."""

    def __init__(self, model: str, doc_max_length: int | None = None, query_max_length: int | None = None):
        """The lengths not given take the checkpoint's (those `train tilde` recorded in its
        lsr_family.json), else the family's defaults (config.py)."""
        self.path = model_path(model)  # a preset name (e.g. splade-tiny: TILDE untrained) or a checkpoint
        lengths = {**SCHEMA.defaults(), **recorded_lengths(self.path),
                   **SCHEMA.checked({"doc_max_length": doc_max_length, "query_max_length": query_max_length},
                                    "tilde model")}
        doc_max_length, query_max_length = lengths["doc_max_length"], lengths["query_max_length"]
        self.tokenizer = load_tokenizer(self.path)
        self.placement = current()  # the device and dtype the model runs on (core/devices.py)
        self.model = load_masked_lm(self.path, family="tilde")
        self.max_length = {"documents": doc_max_length, "queries": query_max_length}
        self.marker = {"documents": self._marker("[unused0]"), "queries": self._marker("[unused1]")}
        self.vocab_size = min(self.model.get_output_embeddings().weight.shape[0], len(self.tokenizer))
        self.excluded_ids = self._ids(lambda token: not self._is_term(token))  # QL terms, BiQDL targets
        self.not_expansions = self._ids(lambda token: not self._is_term(token) or token.startswith("##"))

    def _marker(self, token: str) -> int:
        token_id = self.tokenizer.convert_tokens_to_ids(token)
        return token_id if token_id is not None and token_id != self.tokenizer.unk_token_id \
            else self.tokenizer.cls_token_id

    def _is_term(self, token: str) -> bool:
        """A word or word piece that is not a stop word, special token or punctuation."""
        if token in STOPWORDS or token in self.tokenizer.all_special_tokens:
            return False
        word = token[2:] if token.startswith("##") else token
        return bool(WORD_PIECE.match(word)) and any(ch.isalnum() for ch in word)

    def _ids(self, excluded) -> torch.Tensor:
        vocab = self.tokenizer.convert_ids_to_tokens(list(range(self.vocab_size)))
        return torch.tensor([i for i, token in enumerate(vocab) if excluded(token)], dtype=torch.long)

    def encode_inputs(self, texts: list[str], side: str):
        encoded = self.tokenizer(texts, padding=True, truncation=True, max_length=self.max_length[side],
                                 return_tensors="pt")
        encoded["input_ids"][:, 0] = self.marker[side]
        return self.placement.to(encoded)

    def first_logits(self, texts: list[str], side: str) -> torch.Tensor:
        """B x |V| logits at the marker position (with gradients when the model trains)."""
        encoded = self.encode_inputs(texts, side)
        with self.placement.autocast():
            if hasattr(self.model, "cls"):  # BERT: project the first position only, not all L x |V|
                hidden = self.model.base_model(**encoded).last_hidden_state[:, :1]
                return self.model.cls(hidden)[:, 0, : self.vocab_size].float()
            return self.model(**encoded).logits[:, 0, : self.vocab_size].float()

    @torch.inference_mode()
    def log_likelihoods(self, texts: list[str], side: str) -> torch.Tensor:
        """B x |V| log P(t | text) = log sigmoid(logit_t)."""
        return torch.nn.functional.logsigmoid(self.first_logits(texts, side)).cpu()

    def token_ids(self, text: str, side: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False, truncation=True,
                              max_length=self.max_length[side])["input_ids"]

    def scored_terms(self, text: str) -> list[int]:
        """The token ids of the whole text (not cut at a model length) that TILDE scores, repeats
        kept: stop words, punctuation and special tokens excluded. A query's terms are TILDE-QL's,
        a passage's TILDE-DL's (as in the TILDE code, ielab/TILDE inference.py)."""
        excluded = set(self.excluded_ids.tolist())
        ids = self.tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"]
        return [i for i in ids if i not in excluded]

    def term_counts(self, texts: list[str]) -> torch.Tensor:
        """B x |V|: how often each TILDE-QL term (`scored_terms`) occurs in each text."""
        counts = torch.zeros(len(texts), self.vocab_size)
        for row, text in enumerate(texts):
            for term in self.scored_terms(text):
                counts[row, term] += 1
        return counts

    @torch.inference_mode()
    def expansions(self, texts: list[str], top_m: int, logits: torch.Tensor | None = None) -> list[list[str]]:
        """For each passage, the tokens among its top-m predictions that are whole words, not stop
        words and not in the passage already (m counts before filtering, as in TILDE). Word pieces
        (`##ing`) are left out so that the expanded passage stays plain text that re-tokenises
        to exactly these tokens."""
        if logits is None:
            logits = self.first_logits(texts, "documents")
        top = torch.topk(logits, min(top_m, logits.shape[1]), dim=1).indices.tolist()
        never = set(self.not_expansions.tolist())
        result = []
        for text, candidates in zip(texts, top):
            present = set(self.token_ids(text, "documents"))
            kept = [i for i in candidates if i not in present and i not in never]
            result.append(self.tokenizer.convert_ids_to_tokens(kept))
        return result

    @torch.inference_mode()
    def passage_outputs(self, texts: list[str], top_m: int) -> list[tuple[list[str], torch.Tensor]]:
        """(expansion terms, float16 log P(t|d) over the vocabulary) per passage, one forward pass."""
        logits = self.first_logits(texts, "documents")
        log_likelihoods = torch.nn.functional.logsigmoid(logits).half().cpu()
        return list(zip(self.expansions(texts, top_m, logits), log_likelihoods))
