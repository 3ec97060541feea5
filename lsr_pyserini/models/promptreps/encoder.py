"""PromptReps (Zhuang et al., EMNLP 2024): a training-free retriever from a chat LLM.

The LLM is asked, through its chat template, to represent the text with one word:

    system:    You are an AI assistant that can understand human language.
    user:      Passage: "[text]". Use one word to represent the passage in a retrieval task. Make
               sure your word is in lowercase.            (Query: / "query" for queries)
    assistant: The word is: "                              (prefix; the model continues it)

One forward pass; at the last position (the token after the opening quote is predicted there):
- dense: the last hidden state (after the final norm), L2-normalised;
- sparse: log(1 + ReLU(next-token logits)), restricted to the vocabulary tokens of the text's
  words (the text lower-cased, split into words, each word tokenized on its own, as the paper's
  code does), then the top-k largest (128 by default).

Batches are left-padded (the last position is then the last real token of every row) with
position ids counted from each row's first real token, so padding does not change the vectors.

Sparse terms are the tokenizer's pieces written unambiguously for Lucene's whitespace tokenizer:
`%`, whitespace and non-printable characters are percent-escaped as their UTF-8 bytes (`%25`,
`%20`, ...), byte pieces likewise, so distinct pieces stay distinct terms and queries, escaped the
same way, match them. Expansion terms (tokens not in the text) and stop-word removal of the
original code are not implemented.
"""
from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from ...core.devices import chosen, resolve_device
from ...core.errors import InputError
from ...core.gguf import dequantized, keep_dequantized
from ...core.hf import load_tokenizer, model_error, pretrained_source, quiet_loading
from ...core.presets import resolve_model
from ..registry import dense_side
from ..registry import encoder as register
from .config import SCHEMA
from ..base import DenseVectorSide, SparseEncoder, SparseVector

SYSTEM_PROMPT = "You are an AI assistant that can understand human language."
USER_PROMPTS = {
    "documents": 'Passage: "{text}". Use one word to represent the passage in a retrieval task. '
                 'Make sure your word is in lowercase.',
    "queries": 'Query: "{text}". Use one word to represent the query in a retrieval task. '
               'Make sure your word is in lowercase.',
}
ASSISTANT_PREFIX = 'The word is: "'
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
WORD = re.compile(r"\w+")


def escape_term(piece: str | bytes) -> str:
    """A tokenizer piece as a Lucene term with no whitespace, one-to-one (percent-escaping)."""
    if isinstance(piece, bytes):
        return "".join(chr(b) if 0x21 <= b <= 0x7E and b != 0x25 else f"%{b:02X}" for b in piece)
    out = []
    for ch in piece:
        if ch == "%" or ch.isspace() or not ch.isprintable():
            out.append("".join(f"%{b:02X}" for b in ch.encode("utf-8", "surrogatepass")))
        else:
            out.append(ch)
    return "".join(out) or "%"  # an empty piece (never seen in practice) still names a term


def default_dtype(device: str) -> str:
    """bfloat16 where the hardware computes it natively (CUDA with bf16, CPUs with AVX512-BF16/AMX)."""
    if device.startswith("cuda"):
        return "bfloat16" if torch.cuda.is_bf16_supported() else "float16"
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "float32"
    return "bfloat16" if re.search(r"\b(avx512_bf16|amx_bf16)\b", flags) else "float32"


def load_chat_template(value: str | None) -> str | None:
    """A chat template given as a file path or as the Jinja text itself."""
    if not value:
        return None
    path = Path(value)
    if "{" not in value and path.is_file():
        try:
            return path.read_text(encoding="utf-8")
        except OSError as err:
            raise InputError(f"{value}: cannot read chat template ({err.strerror})") from None
    if "{" not in value:
        raise InputError(f"--chat-template {value}: no such file (give a Jinja template file)")
    return value


@register("promptreps")
class PromptRepsEncoder(DenseVectorSide, SparseEncoder):
    def __init__(self, model: str, **settings):
        config = SCHEMA.complete({"model": model, **settings}, "promptreps encoder")
        doc_max_length, query_max_length = config["doc_max_length"], config["query_max_length"]
        doc_top_k, query_top_k = config["doc_top_k"], config["query_top_k"]
        chat_template, dtype, device = config["chat_template"], config["dtype"], config["device"]
        self.model_reference = model
        self.path = resolve_model(model)
        self.max_length = {"documents": int(doc_max_length), "queries": int(query_max_length)}
        self.top_k = {"documents": doc_top_k, "queries": query_top_k}
        placement = chosen()  # --device/--dtype (core/devices.py) override the preset's auto
        self.device = placement.device if placement and device == "auto" else resolve_device(device)
        if placement and placement.dtype_given:
            dtype = placement.dtype
        self.dtype_name = default_dtype(self.device) if dtype == "auto" else dtype
        if self.dtype_name not in DTYPES:
            raise InputError(f"dtype {dtype!r} is not one of auto, {', '.join(DTYPES)}")
        self.kept = self._kept_folder()
        self.tokenizer = load_tokenizer(str(self.kept) if self.kept and self.kept.is_dir() else self.path)
        template = load_chat_template(chat_template)
        if template:
            self.tokenizer.chat_template = template
        if not getattr(self.tokenizer, "chat_template", None):
            raise InputError(f"model {model!r}: its tokenizer has no chat template, which PromptReps needs; "
                             f"pass one with --chat-template FILE (a Jinja chat template, e.g. the instruct "
                             f"model's) or use an instruct/chat checkpoint")
        self.chat_template = self.tokenizer.chat_template
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.tokenizer.padding_side = "left"
        self._load_model()
        head = self.model.get_output_embeddings()
        self.vocab_size = min(head.weight.shape[0], len(self.tokenizer))
        self.special_ids = set(self.tokenizer.all_special_ids)
        self.terms = [escape_term(p) if p is not None else f"%id{i}"
                      for i, p in enumerate(self.tokenizer.convert_ids_to_tokens(list(range(self.vocab_size))))]
        self.word_ids = lru_cache(maxsize=200_000)(self._word_ids)
        self.dense = PromptRepsDense(self)

    def _kept_folder(self):
        """For a GGUF model, where its de-quantized weights and tokenizer are kept (core/gguf.py)."""
        folder, arguments = pretrained_source(self.path)
        return dequantized(folder, arguments["gguf_file"], self.dtype_name) if "gguf_file" in arguments else None

    def _load_model(self) -> None:
        from transformers import AutoModelForCausalLM

        folder, arguments = pretrained_source(self.path)  # a GGUF file: transformers de-quantizes it
        if self.kept is not None and self.kept.is_dir():  # de-quantized by an earlier load
            folder, arguments = str(self.kept), {}
        try:
            with quiet_loading():  # no loading bar from the library (core/hf.py)
                model = AutoModelForCausalLM.from_pretrained(folder, dtype=DTYPES[self.dtype_name], **arguments)
            if self.kept is not None and arguments:
                keep_dequantized(model, self.tokenizer, self.kept)
        except ValueError as err:
            if "Unrecognized configuration class" in str(err):
                raise InputError(f"model {self.model_reference!r}: not a causal (decoder) LM; PromptReps needs one") from None
            raise model_error(self.path, err) from None
        except Exception as err:
            raise model_error(self.path, err) from None
        self.model = model.to(self.device).eval()
        self.decoder = self.model.base_model  # the transformer without its LM head
        self.head = self.model.get_output_embeddings()

    # -- prompts ------------------------------------------------------------------------------
    def truncate(self, text: str, side: str) -> str:
        ids = self.tokenizer(text, add_special_tokens=False, truncation=True,
                             max_length=self.max_length[side])["input_ids"]
        return self.tokenizer.decode(ids) if len(ids) >= self.max_length[side] else text

    def prompt(self, text: str, side: str) -> str:
        """The chat prompt for one text, ending with the assistant prefix `The word is: "`."""
        messages = [{"role": "system", "content": SYSTEM_PROMPT},
                    {"role": "user", "content": USER_PROMPTS[side].format(text=text)}]
        try:
            rendered = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        except Exception as err:
            raise InputError(f"model {self.model_reference!r}: its chat template failed ({err}); "
                             f"pass another with --chat-template FILE") from None
        return rendered + ASSISTANT_PREFIX

    # -- one forward pass, both representations ------------------------------------------------
    @torch.inference_mode()
    def forward(self, texts: list[str], side: str) -> tuple[torch.Tensor, torch.Tensor]:
        """(next-token logits, normalised last hidden state) at the last position, float32."""
        prompts = [self.prompt(text, side) for text in texts]
        encoded = self.tokenizer(prompts, padding=True, add_special_tokens=False, return_tensors="pt")
        mask = encoded["attention_mask"].to(self.device)
        position_ids = (mask.cumsum(-1) - 1).clamp(min=0)
        # padding positions are masked out; id 0 keeps them inside any embedding matrix
        input_ids = encoded["input_ids"].to(self.device).masked_fill(mask == 0, 0)
        hidden = self.decoder(input_ids=input_ids, attention_mask=mask,
                              position_ids=position_ids).last_hidden_state[:, -1]
        logits = self.head(hidden).float()[:, : self.vocab_size]
        dense = torch.nn.functional.normalize(hidden.float(), p=2, dim=-1)
        return logits.cpu(), dense.cpu()

    def _word_ids(self, word: str) -> tuple[int, ...]:
        ids = self.tokenizer(word, add_special_tokens=False)["input_ids"]
        return tuple(i for i in ids if i < self.vocab_size and i not in self.special_ids)

    def text_token_ids(self, text: str) -> list[int]:
        """Vocabulary ids of the text's words, the text lower-cased, each word tokenized alone."""
        ids: dict[int, None] = {}
        for word in dict.fromkeys(WORD.findall(text.lower())):
            ids.update(dict.fromkeys(self.word_ids(word)))
        return list(ids)

    def sparse_vector(self, logits: torch.Tensor, text: str, side: str) -> SparseVector:
        ids = self.text_token_ids(text)
        if not ids:
            return {}
        weights = torch.log1p(torch.relu(logits[torch.tensor(ids)]))
        top_k = self.top_k[side]
        if top_k and len(ids) > top_k:
            weights, order = torch.topk(weights, int(top_k))
            ids = [ids[i] for i in order.tolist()]
        return {self.terms[i]: w for i, w in zip(ids, weights.tolist()) if w > 0}

    def encode_both(self, texts: list[str], side: str) -> list[tuple[SparseVector, np.ndarray]]:
        texts = [self.truncate(text, side) for text in texts]
        logits, dense = self.forward(texts, side)
        vectors = dense.numpy().astype(np.float32, copy=False)
        return [(self.sparse_vector(row, text, side), vector) for row, text, vector in zip(logits, texts, vectors)]

    # -- the sparse encoder interface ----------------------------------------------------------
    def encode_documents(self, texts: list[str]) -> list[SparseVector]:
        return [sparse for sparse, _ in self.encode_both(texts, "documents")]

    def encode_queries(self, texts: list[str]) -> list[SparseVector]:
        return [sparse for sparse, _ in self.encode_both(texts, "queries")]

    def encode_documents_with_dense(self, texts: list[str]) -> list[tuple[SparseVector, np.ndarray]]:
        """Sparse and dense document vectors from the same forward pass (`encode corpus --dense-store`)."""
        return self.encode_both(texts, "documents")

    def describe(self) -> dict:
        return {"family": "promptreps", "model": self.model_reference, "doc_max_length": self.max_length["documents"],
                "query_max_length": self.max_length["queries"], "doc_top_k": self.top_k["documents"],
                "query_top_k": self.top_k["queries"], "dtype": self.dtype_name, "chat_template": self.chat_template}


class PromptRepsDense:
    """The dense side of a PromptReps encoder, as the dense store and re-rankers use it."""

    def __init__(self, encoder: PromptRepsEncoder):
        self.encoder = encoder

    def encode_documents(self, texts: list[str]) -> np.ndarray:
        return np.stack([dense for _, dense in self.encoder.encode_both(texts, "documents")])

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        return np.stack([dense for _, dense in self.encoder.encode_both(texts, "queries")])

    def describe(self) -> dict:
        return self.encoder.describe()



@dense_side("promptreps")
def promptreps_dense_side(settings: dict) -> PromptRepsDense:
    """The dense side a store's manifest describes."""
    return PromptRepsEncoder(**settings).dense
