"""Scripts that import from the modules of before the one-model-per-family layout keep working."""
from __future__ import annotations

import importlib
import warnings

import pytest

from lsr_pyserini.moved import MOVED

# (old module, a name it defined) for names users' scripts import (docs/api.md showed the first)
OLD_NAMES = [
    ("encoders.bm25aug", "AugmentedQueries"), ("encoders.splade", "SpladeEncoder"), ("encoders.splade", "POOLINGS"),
    ("encoders.splade", "take_rows"), ("encoders.bgem3", "BgeM3Model"), ("encoders.bgem3", "hybrid_score"),
    ("encoders.dense", "TransformerDenseEncoder"), ("encoders.promptreps", "PromptRepsEncoder"),
    ("encoders.sparseembed", "SparseEmbedEncoder"), ("encoders.tilde", "TildeModel"),
    ("encoders.tildev2", "TildeV2Encoder"), ("encoders.ssr", "SSREncoder"), ("encoders.base", "SparseEncoder"),
    ("encoders.shards", "CorpusShards"), ("rerankers.base", "Reranker"), ("rerankers.ssr", "ssr_tok_scores"),
    ("rerankers.bgem3", "BgeM3Reranker"), ("rerankers.tilde", "TildeReranker"), ("rerankers.dense", "DenseReranker"),
    ("train.losses", "contrastive_loss"), ("train.splade", "SpladeFamily"), ("train.ssr", "late_interaction"),
    ("train.ssr", "SSRFamily"), ("train.tildev2", "fit_head_to_bm25"), ("core.quantize", "quantize_linears"),
    ("core.fastpath", "PackedProjection"), ("core.jit", "compiled"), ("core.batching", "encode_in_length_order"),
    ("core.shards", "merge_runs"), ("core.regression", "regress"), ("core.wordpiece_bm25", "TOKENIZER_RECORD"),
    # one meaning per name: the modules called config or settings
    ("core.settings", "Schema"), ("core.settings", "Setting"), ("models.settings", "QUERY_MAX_LENGTH"),
    ("models.configs", "resolve_settings"), ("models.configs", "family_of"), ("serve.config", "ServiceConfig"),
    ("serve.config", "build_config"),
]


@pytest.mark.parametrize("old", sorted(MOVED))
def test_every_old_module_path_imports_with_a_warning_naming_the_new_place(old):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = importlib.import_module(f"lsr_pyserini.{old}")
    assert any(issubclass(w.category, DeprecationWarning) and "moved to lsr_pyserini." in str(w.message)
               for w in caught) or getattr(module, "__moved_to__", None)
    for target in MOVED[old]:  # every new place exists
        importlib.import_module(f"lsr_pyserini.{target}")


@pytest.mark.parametrize("old, name", OLD_NAMES)
def test_old_imports_give_the_new_objects(old, name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        value = getattr(importlib.import_module(f"lsr_pyserini.{old}"), name)
    assert any(getattr(importlib.import_module(f"lsr_pyserini.{t}"), name, None) is value for t in MOVED[old])


def test_an_unknown_name_or_a_module_of_today_is_not_redirected():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        module = importlib.import_module("lsr_pyserini.encoders.splade")
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        module.nothing
    from lsr_pyserini.core.writer import quantize, to_impacts

    assert quantize is to_impacts
    assert not hasattr(importlib.import_module("lsr_pyserini.encoders.query"), "__moved_to__")
