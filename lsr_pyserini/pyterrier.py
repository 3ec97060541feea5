"""PyTerrier transformers over this toolkit (the `[pyterrier]` extra): its encoders, engines,
re-rankers and fusion as steps of PyTerrier pipelines, compared with `pt.Experiment`.

    import pyterrier as pt
    from lsr_pyserini import pyterrier as lsr

    bm25 = lsr.Retriever("indexes/scifact-bm25")
    splade = lsr.Retriever("indexes/scifact-splade-tiny", encoder="splade-tiny")
    pt.Experiment([bm25, splade], topics, qrels, eval_metrics=["nDCG@10", "R@100"])
    path = lsr.Indexer("indexes/mine", encoder="splade-tiny", engine="pisa").index(documents)

The transformers live in `lsr_pyserini/integrations/pyterrier.py` (what each one reads and writes).
"""
__all__ = ["DocEncoder", "QueryEncoder", "Indexer", "Retriever", "Reranker", "Fusion", "doc_encoder", "query_encoder"]


def __getattr__(name: str):
    """Each name read from integrations/pyterrier.py on first use (importing it imports PyTerrier)."""
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__package__}.integrations.pyterrier"), name)
