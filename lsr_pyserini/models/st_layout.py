"""The sentence-transformers folder layout a checkpoint saved here carries, so that
`sentence_transformers.SparseEncoder(DIR)` (SPLADE) or `SentenceTransformer(DIR)` (dense) opens it
and gives the vectors this toolkit gives, while `--encoder DIR` here keeps reading the same folder.

Only the small JSON files sentence-transformers reads (and, for inference-free queries, the
per-term weight vector) are written here; the transformer's weights and tokenizer are the ones the
family saves with transformers' `save_pretrained`. The layouts are the ones sentence-transformers 5
and 6 write (modules.json lists the modules; each module's folder holds its config):

    SPLADE           Transformer (fill-mask, in the root) -> 1_SpladePooling
    inference-free   Router: query    -> query_0_SparseStaticEmbedding (tokenizer + weight vector)
                             document -> document_0_Transformer (fill-mask) -> document_1_SpladePooling
    dense            Transformer (feature-extraction, in the root) -> 1_Pooling [-> 2_Normalize]

What each project setting becomes: pooling -> SpladePooling's pooling_strategy (activation relu:
log(1 + ReLU)); doc/query_max_length -> the Transformer's document_length/query_length; equal
doc/query_top_k -> max_active_dims; query prefixes -> prompts. Settings sentence-transformers cannot
express (different top k per side) are refused in one line rather than saved wrong.
"""
from __future__ import annotations

import json
import logging
from pathlib import Path

from ..core.errors import InputError

log = logging.getLogger(__name__)

TRANSFORMER = "sentence_transformers.base.modules.transformer.Transformer"
SPLADE_POOLING = "sentence_transformers.sparse_encoder.modules.splade_pooling.SpladePooling"
STATIC_EMBEDDING = "sentence_transformers.sparse_encoder.modules.sparse_static_embedding.SparseStaticEmbedding"
ROUTER = "sentence_transformers.base.modules.router.Router"
POOLING = "sentence_transformers.sentence_transformer.modules.pooling.Pooling"
NORMALIZE = "sentence_transformers.base.modules.normalize.Normalize"
OUTPUTS = {"fill-mask": "logits", "feature-extraction": "last_hidden_state"}
QUERY_ROUTE, DOCUMENT_ROUTE = "query_0_SparseStaticEmbedding", "document_0_Transformer"


def _write(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n")


def _versions() -> dict:
    import torch
    import transformers

    return {"transformers": transformers.__version__, "pytorch": torch.__version__}


def _transformer_config(folder: Path, task: str, **lengths) -> None:
    """sentence_bert_config.json: the transformers model in `folder` as a Transformer module."""
    _write(folder / "sentence_bert_config.json", {
        "transformer_task": task,
        "modality_config": {"text": {"method": "forward", "method_output_name": OUTPUTS[task]}},
        "module_output_name": "token_embeddings",
        **{k: v for k, v in lengths.items() if v is not None}})


def _modules(folder: Path, modules: list[tuple[str, str]]) -> None:
    _write(folder / "modules.json", [{"idx": i, "name": str(i), "path": path, "type": kind}
                                     for i, (path, kind) in enumerate(modules)])


def _model_config(folder: Path, model_type: str, similarity: str, prompts: dict, **extra) -> None:
    _write(folder / "config_sentence_transformers.json", {
        "__version__": _versions(), "model_type": model_type, "prompts": prompts, "default_prompt_name": None,
        "similarity_fn_name": similarity, **extra})


def max_active_dims(config: dict, strict: bool = True) -> dict:
    """{"max_active_dims": k} for a SPLADE config keeping the top k of each side (none when it keeps
    every term). When the two sides keep different counts (sentence-transformers has one): InputError,
    or with `strict` False (a training run's save, which must not fail after training) a warning and
    none, sentence-transformers then keeping every term."""
    doc_top_k, query_top_k = config.get("doc_top_k"), config.get("query_top_k")
    if doc_top_k != query_top_k:
        problem = (f"doc_top_k {doc_top_k} and query_top_k {query_top_k} differ: a sentence-transformers "
                   f"SparseEncoder keeps one max_active_dims for both sides")
        if strict:
            raise InputError(f"{problem}; save with equal values")
        log.warning(f"{problem}: saved without one (sentence-transformers keeps every term; --encoder DIR here "
                    f"keeps the top k)")
        return {}
    return {"max_active_dims": int(doc_top_k)} if doc_top_k else {}


def write_splade(folder, config: dict, terms: int, strict: bool = True) -> None:
    """The SPLADE layout around a masked-LM checkpoint saved in `folder` (root): `config` is the
    family's (pooling, lengths, top k); `terms`: the output embedding's rows; `strict`: as
    `max_active_dims`."""
    folder = Path(folder)
    extra = max_active_dims(config, strict)
    _transformer_config(folder, "fill-mask", query_length=int(config["query_max_length"]),
                        document_length=int(config["doc_max_length"]))
    _write(folder / "1_SpladePooling" / "config.json", {
        "pooling_strategy": config["pooling"], "activation_function": "relu", "embedding_dimension": terms})
    _modules(folder, [("", TRANSFORMER), ("1_SpladePooling", SPLADE_POOLING)])
    _model_config(folder, "SparseEncoder", "dot", {"query": "", "document": ""}, **extra)


def write_inference_free_splade(folder, config: dict, terms: int, save_transformer, tokenizer,
                                query_weights: dict[str, float] | None, strict: bool = True) -> None:
    """The Router layout: documents through the masked LM (`save_transformer(subfolder)` writes it
    and its tokenizer to document_0_Transformer), queries through the tokenizer alone, each distinct
    token weighted by `query_weights` (a {token: weight} table, tokens absent from it weigh 0; None:
    weight 1), as `models/splade/encoder.py` weights them."""
    import torch
    from safetensors.torch import save_file

    folder = Path(folder)
    extra = max_active_dims(config, strict)
    document = folder / DOCUMENT_ROUTE
    document.mkdir(parents=True, exist_ok=True)
    save_transformer(document)
    _transformer_config(document, "fill-mask", document_length=int(config["doc_max_length"]))
    _write(folder / "document_1_SpladePooling" / "config.json", {
        "pooling_strategy": config["pooling"], "activation_function": "relu", "embedding_dimension": terms})
    query = folder / QUERY_ROUTE
    query.mkdir(parents=True, exist_ok=True)
    vocabulary = tokenizer.get_vocab()
    if query_weights is None:
        weight = torch.ones(len(vocabulary))
    else:
        weight = torch.zeros(len(vocabulary))
        for token, value in query_weights.items():
            if token in vocabulary and value > 0:  # the encoder drops a token weighing <= 0
                weight[vocabulary[token]] = value
    save_file({"weight": weight.float().contiguous()}, str(query / "model.safetensors"))
    # queries truncated as the encoder truncates them (the tokenizer's length; no special tokens)
    max_length = tokenizer.model_max_length
    tokenizer.model_max_length = int(config["query_max_length"])
    try:
        tokenizer.save_pretrained(query)
    finally:
        tokenizer.model_max_length = max_length
    _write(query / "config.json", {"frozen": True})
    _write(folder / "router_config.json", {
        "types": {QUERY_ROUTE: STATIC_EMBEDDING, DOCUMENT_ROUTE: TRANSFORMER,
                  "document_1_SpladePooling": SPLADE_POOLING},
        "structure": {"query": [QUERY_ROUTE], "document": [DOCUMENT_ROUTE, "document_1_SpladePooling"]},
        "parameters": {"default_route": "document", "allow_empty_key": True, "route_mappings": {}}})
    _modules(folder, [("", ROUTER)])
    _model_config(folder, "SparseEncoder", "dot", {"query": "", "document": ""}, **extra)


def write_dense(folder, *, dim: int, pooling_mode: str, normalize: bool, max_length: int, query_prefix: str,
                doc_prefix: str) -> None:
    """The dense layout around a transformers encoder saved in `folder` (root)."""
    folder = Path(folder)
    _transformer_config(folder, "feature-extraction", max_seq_length=int(max_length))
    _write(folder / "1_Pooling" / "config.json", {"embedding_dimension": dim, "pooling_mode": pooling_mode,
                                                  "include_prompt": True})
    modules = [("", TRANSFORMER), ("1_Pooling", POOLING)]
    if normalize:
        _write(folder / "2_Normalize" / "config.json", {"module_input_name": "sentence_embedding",
                                                         "module_output_name": "sentence_embedding"})
        modules.append(("2_Normalize", NORMALIZE))
    _modules(folder, modules)
    _model_config(folder, "SentenceTransformer", "cosine" if normalize else "dot",
                  {"query": query_prefix, "document": doc_prefix})
