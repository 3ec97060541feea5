"""TILDE re-ranking against a direct computation from a tiny random model's logits.

The expected scores follow the TILDE code (ielab/TILDE inference.py; Zhuang & Zuccon, SIGIR 2021):
P(t | x) = sigmoid(logit_t) at x's first position, whose token is the marker [unused0] (passages)
or [unused1] (queries); QL = sum over the query's tokens of log P(q_i | d); DL = mean over all the
passage's tokens of log P(d_j | q); score = alpha * QL + (1 - alpha) * DL. Stop words and
punctuation are not scored (the token lists below are written out by hand).
"""
import json

import numpy as np
import pytest
import torch

from conftest import build_tiny_bert, error_lines, run_tool
from lsr_pyserini.core.readers import read_run
from lsr_pyserini.stores.tilde import TildeStore

DOC_MAX_LENGTH = 32  # the passage forward pass reads 32 tokens; TILDE-DL must still score all of them
QUERY = "does vitamin d prevent bone fractures?"
QUERY_TERMS = ["vitamin", "prevent", "bone", "fractures"]  # "does", "d" (stop words) and "?" left out
PASSAGES = {  # id -> the passage's scored tokens, in order; the text interleaves stop words and punctuation
    "short": ["vitamin", "calcium", "bones", "fractures"],
    "long": ["statins", "cholesterol", "liver"] * 30 + ["vaccines", "immune", "memory", "cells"] * 5,  # 110 > 64
    "other": ["vaccines", "immune", "memory", "cells", "infection"],
}


def passage_text(terms: list[str]) -> str:
    return " ".join(f"the {term}," if i % 2 else f"{term} and" for i, term in enumerate(terms)) + "."


@pytest.fixture(scope="module")
def tilde_model(tmp_path_factory):
    """The tiny BERT with TILDE's markers, every weight matrix drawn again with std 0.3 (not 0.02):
    the first position then depends on the text enough that the candidates' scores differ well
    beyond float16 rounding."""
    from transformers import BertForMaskedLM

    folder = build_tiny_bert(tmp_path_factory.mktemp("tiny-tilde"), extra_tokens=("[unused0]", "[unused1]"))
    model = BertForMaskedLM.from_pretrained(folder)
    torch.manual_seed(0)
    with torch.no_grad():
        for weight in model.parameters():
            if weight.dim() == 2:
                weight.normal_(0, 0.3)
    model.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def collection(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tilde-collection")
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"_id": docid, "title": "", "text": passage_text(terms)}) + "\n"
                                                 for docid, terms in PASSAGES.items()))
    (folder / "queries.tsv").write_text(f"q1\t{QUERY}\n")
    (folder / "run.txt").write_text("".join(f"q1 Q0 {docid} {rank} {10 - rank}.0 bm25\n"
                                            for rank, docid in enumerate(PASSAGES, 1)))
    return folder


@pytest.fixture(scope="module")
def store(tilde_model, collection):
    store = collection / "tilde.store"
    result = run_tool("expand", "--model", tilde_model, "--input", collection / "corpus.jsonl", "--store", store,
                      "--max-length", DOC_MAX_LENGTH, "--batch-size", "2")
    assert result.returncode == 0, result.stderr
    return store


def first_position_log_likelihoods(model_dir, text: str, marker: str, max_length: int) -> np.ndarray:
    """log sigmoid of the MLM logits at the first position, the first token replaced by the marker."""
    from transformers import BertForMaskedLM, BertTokenizer

    tokenizer = BertTokenizer.from_pretrained(model_dir)
    model = BertForMaskedLM.from_pretrained(model_dir).eval()
    ids = tokenizer(text, truncation=True, max_length=max_length)["input_ids"]
    ids[0] = tokenizer.convert_tokens_to_ids(marker)
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0, 0]
    return torch.nn.functional.logsigmoid(logits).numpy()


def expected_scores(model_dir, alpha: float) -> dict[str, float]:
    from transformers import BertTokenizer

    ids = BertTokenizer.from_pretrained(model_dir).convert_tokens_to_ids
    query = first_position_log_likelihoods(model_dir, QUERY, "[unused1]", 64)
    scores = {}
    for docid, terms in PASSAGES.items():
        passage = first_position_log_likelihoods(model_dir, passage_text(terms), "[unused0]", DOC_MAX_LENGTH)
        ql = sum(passage[ids(term)] for term in QUERY_TERMS)
        dl = np.mean([query[ids(term)] for term in terms])
        scores[docid] = alpha * ql + (1 - alpha) * dl
    return scores


def test_store_holds_every_token_of_a_passage_longer_than_the_query_length(tilde_model, store):
    from transformers import BertTokenizer

    tokenizer = BertTokenizer.from_pretrained(tilde_model)
    tilde_store = TildeStore(str(store))
    for docid, terms in PASSAGES.items():
        assert all(tokenizer.tokenize(term) == [term] for term in terms)  # one token per word: the list is exact
        assert tilde_store.passage_terms(docid).tolist() == tokenizer.convert_tokens_to_ids(terms)
    assert len(tilde_store.passage_terms("long")) == 110


@pytest.mark.parametrize("alpha", [None, 0.0, 0.3])  # None: the default, TILDE-QL alone
def test_tilde_ql_dl_and_alpha_equal_a_direct_computation(tilde_model, collection, store, alpha, tmp_path):
    output = tmp_path / "run.txt"
    result = run_tool("rerank", "--reranker", "tilde", "--run", collection / "run.txt",
                      "--queries", collection / "queries.tsv", "--store", store, "--output", output,
                      *(["--alpha", alpha] if alpha is not None else []))
    assert result.returncode == 0, result.stderr
    measured = dict(read_run(str(output))["q1"])
    expected = expected_scores(tilde_model, 1.0 if alpha is None else alpha)
    assert measured.keys() == expected.keys()
    assert np.diff(sorted(expected.values())).min() > 0.02  # candidates told apart, well beyond the tolerance
    for docid, score in expected.items():  # the store holds float16 likelihoods
        assert measured[docid] == pytest.approx(score, abs=3e-3), docid
    assert [d for d, _ in read_run(str(output))["q1"]] == sorted(expected, key=lambda d: -expected[d]), (measured, expected)


def test_training_ql_scores_are_the_rerankers(tilde_model):
    """`train tilde --ranking-weight` ranks with the TILDE-QL scores the re-ranker computes."""
    from argparse import Namespace

    from lsr_pyserini.models.tilde.training import TildeFamily

    family = TildeFamily(str(tilde_model), Namespace(doc_max_length=DOC_MAX_LENGTH, query_max_length=64)).eval()
    with torch.no_grad():
        logits = family.tilde.first_logits([passage_text(terms) for terms in PASSAGES.values()], "documents")
        scores = family.query_likelihoods([QUERY, QUERY], logits)
    assert scores.shape == (2, len(PASSAGES))
    assert scores[1].tolist() == pytest.approx(list(expected_scores(tilde_model, 1.0).values()), abs=1e-4)


def test_alpha_out_of_range_and_a_store_with_cut_passages_are_refused(collection, store, tmp_path):
    common = ("--reranker", "tilde", "--run", collection / "run.txt", "--queries", collection / "queries.tsv",
              "--output", tmp_path / "run.txt")
    result = run_tool("rerank", *common, "--store", store, "--alpha", "1.5")
    assert result.returncode == 2 and "argument --alpha: expected a number in [0, 1], got '1.5'" in result.stderr
    old = tmp_path / "old.store"
    old.mkdir()
    for path in store.iterdir():
        (old / path.name).write_bytes(path.read_bytes())
    meta = json.loads((old / "tilde.json").read_text())
    del meta["passage_terms"]
    (old / "tilde.json").write_text(json.dumps(meta))
    result = run_tool("rerank", *common, "--store", old, "--alpha", "0.5")
    assert result.returncode == 2 and "its passage terms stop at 64 tokens" in error_lines(result)[0]
    assert run_tool("rerank", *common, "--store", old).returncode == 0  # TILDE-QL reads no passage terms


@pytest.mark.parametrize("query,first", [("which immune cells fight infection?", "other"),
                                         ("do calcium supplements protect bones?", "short")])
def test_with_oracle_likelihoods_the_passage_holding_the_query_terms_ranks_first(tilde_model, collection, query,
                                                                                first, tmp_path):
    """Candidate ids, query tokenisation and sign, end to end: a store whose log P(t|d) is log 0.9 for
    the passage's own tokens and log 0.01 for all others (rows in another order than the run's) makes
    TILDE-QL rank first the one candidate holding the query's scored terms, whatever its first-stage rank."""
    from transformers import BertTokenizer

    from lsr_pyserini.stores.tilde import TildeStoreWriter

    ids = BertTokenizer.from_pretrained(tilde_model).convert_tokens_to_ids
    vocab_size = len(BertTokenizer.from_pretrained(tilde_model))
    docids = sorted(PASSAGES, reverse=True)  # store rows: short, other, long; run order: short, long, other
    likelihoods = []
    for docid in docids:
        row = torch.full((vocab_size,), float(np.log(0.01)))
        row[ids(PASSAGES[docid])] = float(np.log(0.9))
        likelihoods.append(row)
    store = tmp_path / "oracle.store"
    TildeStoreWriter(str(store)).write(docids, likelihoods, [ids(PASSAGES[d]) for d in docids],
                                       {"model": str(tilde_model), "vocab_size": vocab_size, "passage_terms": "all tokens"})
    (tmp_path / "queries.tsv").write_text(f"q1\t{query}\n")
    output = tmp_path / "run.txt"
    result = run_tool("rerank", "--reranker", "tilde", "--run", collection / "run.txt", "--queries",
                      tmp_path / "queries.tsv", "--store", store, "--output", output)
    assert result.returncode == 0, result.stderr
    ranked = read_run(str(output))["q1"]
    assert ranked[0][0] == first and ranked[0][1] > ranked[1][1] + 1, ranked
