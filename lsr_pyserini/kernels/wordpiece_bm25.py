"""BM25 over a model's WordPiece vocabulary, computed exactly as Lucene computes it.

One tokenisation (`pretokenize`) serves both the index (documents written as space-joined
WordPiece tokens and indexed with `--pretokenized`, i.e. Lucene's whitespace analyzer) and the
training of BM25 query augmentation, so the IDF vector v and the term-frequency vector f(d) the
model is trained with are the ones Lucene scores with:

    v_t   = ln(1 + (N - df_t + 0.5) / (df_t + 0.5))
    f_t(d) = tf / (tf + k1 * (1 - b + b * L(d) / avgdl))

where N counts the documents that have at least one token, avgdl = total tokens / N, and L(d) is
the document length after Lucene's lossy one-byte norm encoding (`lucene_length`, SmallFloat's
intToByte4/byte4ToInt: exact up to 23 tokens, then 4 significant bits). Lucene's BM25Similarity
(k1=0.9, b=0.4 in Anserini) multiplies v_t * f_t(d) by the query term's boost.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..core.errors import InputError
from ..core.indexes import TOKENIZER_RECORD
from ..core.options import checked, non_negative_float, probability
from ..core.readers import read_corpus

PROBE_TEXT = "Héllo WORLD: naïve co-operation, 3.5mg/kg IL-6 ÅNGSTRÖM"
DEFAULT_K1, DEFAULT_B = 0.9, 0.4


def pretokenize(tokenizer, texts: list[str]) -> list[list[str]]:
    """WordPiece tokens of each whole text (no truncation, no special tokens)."""
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # "sequence longer than the model's maximum": intended, not truncated
    try:
        ids = tokenizer(texts, add_special_tokens=False, truncation=False)["input_ids"]
    finally:
        hf_logging.set_verbosity(verbosity)
    return [tokenizer.convert_ids_to_tokens(row) for row in ids]


def corpus_idf(tokenizer, texts: list[str], batch: int = 1024, progress=None) -> dict[str, float]:
    """{token: Lucene BM25's idf} of every entry of the tokenizer's vocabulary over `texts`' tokens
    (whole texts, no special tokens; a token in no text gets the highest idf), computed a batch of
    texts at a time (one document's token ids are never all held at once)."""
    from transformers.utils import logging as hf_logging

    def documents():
        for start in range(0, len(texts), batch):
            yield from tokenizer(texts[start: start + batch], add_special_tokens=False, truncation=False)["input_ids"]
            if progress is not None:
                progress.update(len(texts[start: start + batch]))

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # "sequence longer than the model's maximum": intended, not truncated
    try:
        idf = BM25Statistics.from_token_ids(documents(), len(tokenizer)).idf()
    finally:
        hf_logging.set_verbosity(verbosity)
    tokens = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    return {token: float(value) for token, value in zip(tokens, idf)}


def tokenizer_fingerprint(tokenizer) -> dict:
    """What identifies a tokenizer's output: its vocabulary and how it normalises a probe text."""
    vocab = sorted(tokenizer.get_vocab().items(), key=lambda item: item[1])
    digest = hashlib.sha256(json.dumps(vocab, ensure_ascii=False).encode("utf-8")).hexdigest()
    return {"class": type(tokenizer).__name__, "vocab_size": len(vocab), "vocab_sha256": digest,
            "probe": pretokenize(tokenizer, [PROBE_TEXT])[0]}


def write_tokenizer_record(index: Path, tokenizer, model: str, scoring: str) -> None:
    record = {"model": model, "scoring": scoring, "tokenizer": tokenizer_fingerprint(tokenizer)}
    (index / TOKENIZER_RECORD).write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n")


def check_index_tokenizer(index: str, tokenizer, model: str) -> dict:
    """The index's record; InputError unless the index was built with this tokenizer."""
    path = Path(index) / TOKENIZER_RECORD
    if not Path(index).is_dir():
        raise InputError(f"{index}: no such index folder")
    if not path.is_file():
        raise InputError(f"{index}: not a WordPiece BM25 index ({TOKENIZER_RECORD} missing): "
                         f"build it with `python -m lsr_pyserini.bm25aug index`")
    try:
        record = json.loads(path.read_text())
        recorded = record["tokenizer"]
    except (OSError, ValueError, KeyError):
        raise InputError(f"{path}: unreadable tokenizer record") from None
    if recorded != tokenizer_fingerprint(tokenizer):
        raise InputError(f"{index}: was built with the tokenizer of {record.get('model')!r}, which differs "
                         f"from the tokenizer of {model!r}: rebuild the index with this model")
    return record


def _long_to_int4(value: int) -> int:
    bits = value.bit_length()
    if bits < 4:
        return value
    shift = bits - 4
    return ((value >> shift) & 0x07) | ((shift + 1) << 3)


def _int4_to_long(encoded: int) -> int:
    bits, shift = encoded & 0x07, (encoded >> 3) - 1
    return bits if shift == -1 else (bits | 0x08) << shift


_MAX_INT4 = _long_to_int4(2**31 - 1)
_NUM_FREE_VALUES = 255 - _MAX_INT4


def lucene_length(length: int) -> int:
    """The document length Lucene's BM25 sees: byte4ToInt(intToByte4(length))."""
    if length < _NUM_FREE_VALUES:
        return length
    encoded = _NUM_FREE_VALUES + _long_to_int4(length - _NUM_FREE_VALUES)
    return min(_NUM_FREE_VALUES + _int4_to_long(encoded - _NUM_FREE_VALUES), 2**31 - 1)


@dataclass
class BM25Statistics:
    """Collection statistics over a vocabulary of `vocab_size` token ids."""
    doc_count: int
    doc_freq: np.ndarray  # vocab_size, documents containing the token
    avgdl: float

    @classmethod
    def from_token_ids(cls, documents: list[list[int]], vocab_size: int) -> "BM25Statistics":
        doc_freq = np.zeros(vocab_size, dtype=np.int64)
        total, count = 0, 0
        for ids in documents:
            if len(ids) == 0:
                continue  # Lucene has no field (and no norm) for a document without tokens
            count += 1
            total += len(ids)
            doc_freq[np.unique(ids)] += 1
        if count == 0:
            raise InputError("corpus has no document with any token")
        return cls(count, doc_freq, total / count)

    def idf(self) -> np.ndarray:
        df = self.doc_freq.astype(np.float64)
        return np.log(1.0 + (self.doc_count - df + 0.5) / (df + 0.5))

    def document_fraction(self) -> np.ndarray:
        """h_t: the share of documents that contain token t."""
        return self.doc_freq / self.doc_count

    def length_norm(self, length: int, k1: float = DEFAULT_K1, b: float = DEFAULT_B) -> float:
        """k1 * (1 - b + b * L(d) / avgdl), L(d) the length Lucene stores (`lucene_length`)."""
        return k1 * (1.0 - b + b * lucene_length(length) / self.avgdl)

    def tf_part(self, ids: list[int], k1: float = DEFAULT_K1, b: float = DEFAULT_B) -> tuple[np.ndarray, np.ndarray]:
        """(distinct token ids, f_t(d)) of one document."""
        if len(ids) == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        tokens, tf = np.unique(np.asarray(ids, dtype=np.int64), return_counts=True)
        return tokens, tf / (tf + self.length_norm(len(ids), k1, b))


def bm25_check(k1: float, b: float) -> None:
    """InputError unless k1 is a finite number >= 0 and b one in [0, 1]."""
    checked("k1", k1, non_negative_float)
    checked("b", b, probability)


class CorpusVectors:
    """Each document's BM25 vector v * f(d) (or its binary bag of words), as sparse id/value rows,
    over the tokenizer's pieces of the whole (untruncated) text."""

    def __init__(self, corpus: str, tokenizer, k1: float, b: float, bm25: bool, batch: int = 256):
        docids, token_ids = [], []
        vocab = tokenizer.get_vocab()
        texts = []
        for doc in read_corpus(corpus):
            docids.append(doc.id)
            texts.append(doc.text)
        for start in range(0, len(texts), batch):
            for tokens in pretokenize(tokenizer, texts[start:start + batch]):
                token_ids.append([vocab[t] for t in tokens])
        self.vocab_size = len(tokenizer)
        self.statistics = BM25Statistics.from_token_ids(token_ids, self.vocab_size)
        idf = self.statistics.idf()
        import torch  # here: the BM25 defaults above are read by commands that need no torch

        self.rows: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
        for docid, ids in zip(docids, token_ids):
            tokens, tf_part = self.statistics.tf_part(ids, k1, b)
            values = idf[tokens] * tf_part if bm25 else np.ones(len(tokens))
            self.rows[docid] = (torch.from_numpy(tokens), torch.from_numpy(values).float())

    def matrix(self, docids: list[str]) -> "torch.Tensor":  # noqa: F821
        import torch

        dense = torch.zeros(len(docids), self.vocab_size)
        for row, docid in enumerate(docids):
            tokens, values = self.rows[docid]
            dense[row, tokens] = values
        return dense
