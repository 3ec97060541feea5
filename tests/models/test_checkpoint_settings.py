"""Every trainable family keeps every one of its declared settings through a checkpoint, at a value
other than the default: `train FAMILY --max-steps 0` from a preset that sets them all, then the
folder is opened as users open it (`encoder_settings(DIR)`, which `encode --encoder DIR`,
`load_encoder(DIR)` and `Searcher(encoder=DIR)` resolve; `QueryEncoder(DIR)`; the re-rankers' and
`expand`'s model; bm25aug's query side) and each setting is checked twice: its value is the one
trained with, and what is encoded with it differs from what the default gives, in the way the
setting says (a top k keeps at most k terms, a scale multiplies, a batch size is the batches').

The table is driven by the declarations: a family that gains a setting without a non-default
value here fails `test_the_table_sets_every_declared_setting_of_every_trainable_family`."""
from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest
import torch

from conftest import SAMPLE
from lsr_pyserini.core.errors import InputError

QUERIES, QRELS, CORPUS = SAMPLE / "queries.test.tsv", SAMPLE / "qrels.test.trec", SAMPLE / "corpus.jsonl"
DOCUMENTS = [f"{d['title']} {d['text']}" for d in map(json.loads, CORPUS.read_text().splitlines())]
QUERY_TEXTS = [line.split("\t", 1)[1] for line in QUERIES.read_text().splitlines()]
QUERY_IDS = [line.split("\t", 1)[0] for line in QUERIES.read_text().splitlines()]
QUERY_TERMS = {"vitamin": 2.5, "bone": 1.25, "sleep": 0.5}  # SPLADE's inference-free query table


@dataclass(frozen=True)
class Value:
    """A non-default value of one setting; `baseline` what it is compared with (the family's default,
    or where that is None, a value that means the same, as None is 'not given' to an override);
    `check(case, value)`: what encoding with it must show beyond differing from the baseline's (the
    differential is skipped where `differs` is False: a value the baseline refuses, checked by `check`);
    `recorded`: what the checkpoint records where training decides it (None: the value itself)."""

    value: object
    baseline: object = "default"
    check: Callable | None = None
    differs: bool = True
    recorded: object = None


# -- what encoding with a value must show -------------------------------------------------------

def at_most_k_terms(side):
    def check(case, k):
        vectors = case.floats()[side]
        assert max(map(len, vectors)) == k and all(len(v) <= k for v in vectors)
    return check


def scaled(side):
    def check(case, scale):
        floats, impacts = case.floats()[side], case.impacts()[side]
        from lsr_pyserini.core.writer import to_impacts

        assert impacts == [to_impacts(vector, scale) for vector in floats]
    return check


def batches_of(case, size):
    assert max(case.batches()) == size < len(DOCUMENTS)


def summed_pooling(case, _):
    """Sum pooling weighs every term at least as max pooling does, and a repeated one more."""
    every = {"doc_top_k": 10_000}  # the top k of each would pick other terms
    summed, maximal = case.floats(**every)["documents"], case.floats(pooling="max", **every)["documents"]
    assert all(summed[i].get(term, 0) >= weight - 1e-5 for i, v in enumerate(maximal) for term, weight in v.items())
    assert any(summed[i].get(term, 0) > weight + 1e-3 for i, v in enumerate(maximal) for term, weight in v.items())


def table_queries(case, _):
    """Inference-free queries: the tokenizer's tokens weighted by the checkpoint's table (1 elsewhere)."""
    encoder = case.encoder()
    assert encoder.query_mode == "tokenizer" and encoder.query_weight_table == QUERY_TERMS
    assert encoder.encode_queries(["vitamin and sleep"])[0] == {"vitamin": 2.5, "sleep": 0.5}


def exact_bm25(case, _):
    """BM25 folded into the impacts: the base's corpus statistics carried into the checkpoint, each
    document's BM25 terms (Lucene's formula at the checkpoint's k1 and b), each query's at its weight."""
    from lsr_pyserini.models.exact_match import EXACT_PREFIX, EXACT_STATS_FILE, ExactMatch, analyze

    assert (case.folder / EXACT_STATS_FILE).is_file()
    encoder = case.encoder()
    assert (encoder.exact.weight, encoder.exact.k1, encoder.exact.b) == (3.5, 1.7, 0.85)
    reference, _ = ExactMatch.from_terms(analyze(DOCUMENTS), 1.7, 0.85, 3.5)
    document = encoder.encode_documents([DOCUMENTS[0]])[0]
    expected = reference.documents([DOCUMENTS[0]])[0]
    assert {t: w for t, w in document.items() if t.startswith(EXACT_PREFIX)} == pytest.approx(expected)
    query = encoder.encode_queries(["statins statins lower"])[0]
    assert {t: w for t, w in query.items() if t.startswith(EXACT_PREFIX)} == {"bm25:statin": 7.0, "bm25:lower": 3.5}


def int8(case, _):
    """SPLADE's and SparseEmbed's projection as an int8 filter (exact float32 rescoring: the same
    impacts by design), TILDEv2's BERT Linear layers in int8 (other floats)."""
    encoder = case.encoder()
    assert "int8" in json.dumps(encoder.describe())
    if case.family == "splade":
        assert encoder.model._int8 is not None and case.encoder(quantize="none").model._int8 is None
    elif case.family == "sparseembed":
        assert encoder.model.int8 is not None and case.encoder(quantize="none").model.int8 is None
    else:
        assert not same(case.floats(), case.floats(quantize="none"))


def heads_of_dim(case, dim):
    assert case.encoder().model.dim == dim
    with pytest.raises(InputError, match="dim"):
        case.encoder(dim=32)


def body_recorded(case, body):
    case.encoder()  # its own body
    with pytest.raises(InputError, match="body"):
        case.encoder(body="xlm-roberta")


def moved_backbone(case, location):
    coder = case.encoder().coder
    assert coder.backbone_model == location and coder.backbone.model_reference == location


def no_cls_terms(case, _):
    assert not any(term.startswith("c") and term[1:].isdigit() for v in case.floats()["documents"] for term in v)
    assert any(term.startswith("c") and term[1:].isdigit() for v in case.floats(cls_terms=True)["documents"]
               for term in v)


def query_codes_per_token(case, budget):
    """Adaptive K: a query of n tokens keeps max(query_k_min, ceil(budget / n)) codes per token, so at
    most max(n x query_k_min, budget + n) token pseudo-terms (the default budget, 256, keeps K each)."""
    encoder = case.encoder()
    k_min = encoder.coder.model.settings["query_k_min"]
    for text, vector in zip(QUERY_TEXTS, case.floats()["queries"]):
        tokens = len(encoder.coder.backbone.tokenizer(text)["input_ids"])  # special tokens too: an upper bound
        assert len([term for term in vector if term.startswith("s")]) <= max(tokens * k_min, budget + tokens)


def no_augmentation(case, _):
    """a(q) = 0: a query's weights name its own tokens only (untrained, a(q) adds a tiny weight to every
    other token)."""
    tokenizer = case.augmented().augmented.model.tokenizer
    own = [set(tokenizer.tokenize(text)) for text in QUERY_TEXTS]
    assert all(set(vector) <= tokens for vector, tokens in zip(case.floats()["queries"], own))
    assert all(set(vector) > tokens for vector, tokens in zip(case.floats(augment=True)["queries"], own))


def cls_weight_scores(case, weight):
    """SSR-CLS = SSR-tok + cls_weight x z_q,CLS . z_d,CLS: the re-ranker's and training's score."""
    model = case.encoder().coder.model
    h = model.cls_sae.latents
    no_tokens = (torch.zeros(1, 1, 1, dtype=torch.long), torch.zeros(1, 1, 1))
    score, tokens = model.score((no_tokens, torch.ones(1, h)), (no_tokens, torch.ones(1, h)))
    assert float(tokens) == 0 and float(score) == pytest.approx(weight * h)


def unweighted(case, _):
    """w(q) = 1: a query's own tokens weigh their counts (the checkpoint's re-weighting would double them)."""
    for own, weighted in zip(case.floats()["queries"], case.floats(augment=False, weighting=True)["queries"]):
        assert own.keys() == weighted.keys() and all(weighted[t] == pytest.approx(2 * w) for t, w in own.items())
        assert all(w == int(w) for w in own.values())


def bm25_of_training(case, _):
    """Searches take the k1 and b the model was trained with (Searcher's engine options), unless
    the caller gives theirs (Searcher's `encoder_options`)."""
    assert case.augmented().bm25 == (case.settings["k1"], case.settings["b"])
    assert case.augmented(k1=0.9, b=0.3).bm25 == (0.9, 0.3)


def scoring_of_training(case, scoring):
    case.augmented()  # the fake index is a `bow` one
    with pytest.raises(InputError, match="trained for 'bow' scoring"):
        case.augmented(index_scoring="bm25")
    with pytest.raises(InputError, match="scoring='bm25' was given but .* 'bow' index"):
        case.augmented(scoring="bm25")  # the caller's scoring is checked against the index too


def tilde_lengths(side):
    def check(case, length):
        assert case.tilde().max_length[side] == length
    return check


# family -> the checkpoints trained for it, each a preset of non-default values (settings that need
# another to mean anything, SPLADE's inference-free queries, get a checkpoint of their own)
TABLE: dict[str, list[dict[str, Value]]] = {
    "splade": [{
        "impact_scale": Value(37, check=scaled("documents")),
        "query_impact_scale": Value(11, baseline=37, check=scaled("queries")),
        "batch_size": Value(3, check=batches_of, differs=False),
        "pooling": Value("sum", check=summed_pooling),
        "doc_max_length": Value(24), "query_max_length": Value(5),
        "doc_top_k": Value(7, baseline=10_000, check=at_most_k_terms("documents")),
        "query_top_k": Value(3, baseline=10_000, check=at_most_k_terms("queries")),
        "quantize": Value("int8", check=int8, differs=False),
    }, {
        "query_mode": Value("tokenizer", check=table_queries),
        # the table trained (here for 0 steps: as it started) is the checkpoint's own file
        "query_weights": Value("terms.json", check=table_queries, differs=False, recorded="query_weights.json"),
    }, {
        "exact_match": Value("bm25", check=exact_bm25),
        "exact_match_weight": Value(3.5, check=exact_bm25),
        "k1": Value(1.7, check=exact_bm25), "b": Value(0.85, check=exact_bm25),
    }],
    "tildev2": [{
        "impact_scale": Value(37, check=scaled("documents")),
        "query_impact_scale": Value(3, check=scaled("queries")),
        "batch_size": Value(3, check=batches_of, differs=False),
        "doc_max_length": Value(24), "query_max_length": Value(5),
        "quantize": Value("int8", check=int8, differs=False),
    }],
    "sparseembed": [{
        "impact_scale": Value(37, check=scaled("documents")),
        "query_impact_scale": Value(11, baseline=37, check=scaled("queries")),
        "batch_size": Value(3, check=batches_of, differs=False),
        "doc_max_length": Value(24), "query_max_length": Value(5),
        "doc_top_k": Value(7, check=at_most_k_terms("documents")),
        "query_top_k": Value(3, check=at_most_k_terms("queries")),
        "quantize": Value("int8", check=int8, differs=False),
        "dim": Value(16, check=heads_of_dim, differs=False),
    }],
    "bgem3": [{
        "impact_scale": Value(5000, check=scaled("documents")),
        "query_impact_scale": Value(700, baseline=5000, check=scaled("queries")),
        "batch_size": Value(3, check=batches_of, differs=False),
        "doc_max_length": Value(24), "query_max_length": Value(5),
        "doc_top_k": Value(7, baseline=10_000, check=at_most_k_terms("documents")),
        "query_top_k": Value(1, baseline=10_000, check=at_most_k_terms("queries")),
        "body": Value("bert", check=body_recorded, differs=False),
    }],
    "bm25aug": [{  # the boost scale: query_impact_scale, else impact_scale (a checkpoint of its own)
        "query_impact_scale": Value(11, baseline=100),
        "batch_size": Value(3, check=batches_of, differs=False),
        "augment": Value(False, check=no_augmentation),
        "weighting": Value(False, check=unweighted),
        "query_max_length": Value(5),
        "scoring": Value("bow", check=scoring_of_training, differs=False),
        "k1": Value(1.7, check=bm25_of_training, differs=False),
        "b": Value(0.55, check=bm25_of_training, differs=False),
    }, {
        "impact_scale": Value(37),
    }],
    "ssr": [{
        "impact_scale": Value(37, check=scaled("documents")),
        "query_impact_scale": Value(7, check=scaled("queries")),
        "batch_size": Value(3, check=batches_of, differs=False),
        "backbone": Value("moved-backbone", check=moved_backbone, differs=False),
        "query_term_budget": Value(8, baseline=256, check=query_codes_per_token),
        "query_k_min": Value(1, baseline=4),
        "cls_terms": Value(False, baseline=True, check=no_cls_terms),
        "cls_weight": Value(0.25, check=cls_weight_scores, differs=False),
    }],
    "tilde": [{
        "doc_max_length": Value(24, check=tilde_lengths("documents")),
        "query_max_length": Value(5, check=tilde_lengths("queries")),
    }],
}
CASES = [(family, number) for family, checkpoints in TABLE.items() for number in range(len(checkpoints))]


def test_the_table_sets_every_declared_setting_of_every_trainable_family():
    """A setting declared later, or a family that becomes trainable, fails here until the table gives
    it a value other than its default (and a check that encoding uses it)."""
    from lsr_pyserini.models.registry import TRAINERS, schema_of
    from lsr_pyserini.train import load_families

    load_families()
    assert sorted(TABLE) == sorted(TRAINERS)
    for family, checkpoints in TABLE.items():
        schema = schema_of(family)
        given = [name for checkpoint in checkpoints for name in checkpoint]
        assert sorted(given) == sorted(set(schema.names) - {"model"}), family
        for checkpoint in checkpoints:
            for name, value in checkpoint.items():
                assert value.value != schema[name].default, (family, name)


# -- the checkpoints ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def negatives(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("runs") / "negatives.txt"
    path.write_text("".join(f"{q} Q0 s{d} {d} {20 - d} bm25\n" for q in QUERY_IDS for d in range(1, 13)))
    return path


@pytest.fixture(scope="module")
def ssr_model(tiny_encoder_only, tmp_path_factory) -> Path:
    """An SSR model folder of the tiny backbone (`ssr embed` then `ssr fit`, a few steps)."""
    from lsr_pyserini.commands.ssr import main as ssr_main

    work = tmp_path_factory.mktemp("ssr")
    ssr_main(["embed", "--model", str(tiny_encoder_only), "--input", str(CORPUS), "--output", str(work / "tokens"),
              "--max-length", "64", "--quiet"])
    ssr_main(["fit", "--tokens", str(work / "tokens"), "--output", str(work / "model"), "--latents", "64", "--k", "8",
              "--cls-latents", "32", "--cls-k", "4", "--steps", "2", "--cls-steps", "2", "--batch-size", "64",
              "--cls-batch-size", "4", "--quiet"])
    return work / "model"


def base_model(family, tmp_path, tiny_mlm, tiny_encoder_only, ssr_model) -> str:
    if family == "bgem3":
        return str(tiny_encoder_only)  # a BERT body: new heads
    if family == "ssr":
        return str(ssr_model)
    if family == "splade":  # inference-free queries read their table from the base folder
        base = tmp_path / "base"
        shutil.copytree(tiny_mlm, base)
        (base / "terms.json").write_text(json.dumps(QUERY_TERMS))
        from lsr_pyserini.models.exact_match import ExactMatch, analyze  # an adapted base: its corpus statistics

        ExactMatch.from_terms(analyze(DOCUMENTS), 0.9, 0.4, 2.0)[0].save(base)
        return str(base)
    return str(tiny_mlm)


def preset_values(family, checkpoint, tmp_path, tiny_encoder_only) -> dict:
    values = {name: value.value for name, value in checkpoint.items()}
    if family == "ssr":  # the backbone at another place than the one the SSR model records
        values["backbone"] = str(tmp_path / "moved-backbone")
        shutil.copytree(tiny_encoder_only, values["backbone"])
    return values


@dataclass
class Case:
    """One trained checkpoint, opened as users open it, with or without overrides."""

    family: str
    folder: Path
    tmp: Path

    @property
    def settings(self) -> dict:
        from lsr_pyserini.encoders.query import encoder_settings

        return encoder_settings(str(self.folder))

    def resolved(self, **overrides) -> dict:
        from lsr_pyserini.encoders.query import encoder_settings

        return encoder_settings(str(self.folder), **overrides)

    def encoder(self, **overrides):
        from lsr_pyserini.api import load_encoder

        return load_encoder(str(self.folder), **overrides)

    def floats(self, **overrides) -> dict:
        """The float vectors of the documents (in batches of one: no padding effect) and queries."""
        encoder = self.encoder(**overrides)
        documents = [] if self.family == "bm25aug" else [encoder.encode_documents([text])[0] for text in DOCUMENTS]
        return {"documents": documents, "queries": [encoder.encode_queries([text])[0] for text in QUERY_TEXTS]}

    def impacts(self, **overrides) -> dict:
        """What `encode corpus` and `encode queries` write (CorpusShards, QueryEncoder)."""
        from lsr_pyserini.encoders.query import QueryEncoder
        from lsr_pyserini.encoders.recipes import CorpusShards

        settings = self.resolved(**overrides)
        shards = CorpusShards(settings)
        encoder = shards.load()
        one_at_a_time = encoder.encode_documents  # the same floats as floats(): batches change the last bits
        encoder.encode_documents = lambda texts: [one_at_a_time([text])[0] for text in texts]
        return {"documents": shards.encode(DOCUMENTS), "queries": QueryEncoder.from_settings(settings).batch_encode(
            QUERY_TEXTS)}

    def batches(self, **overrides) -> list[int]:
        """The sizes of the batches encoding the documents is run in."""
        if self.family == "bm25aug":
            side = self.augmented(**overrides)
            sizes, encode = [], side.augmented.encoder.encode_queries
            side.augmented.encoder.encode_queries = lambda texts: sizes.append(len(texts)) or encode(texts)
            side.queries(QUERY_IDS * 2, QUERY_TEXTS * 2)
            return sizes
        from lsr_pyserini.encoders.recipes import CorpusShards

        shards = CorpusShards(self.resolved(**overrides))
        encoder, sizes = shards.load(), []
        encode = encoder.encode_documents
        encoder.encode_documents = lambda texts: sizes.append(len(texts)) or encode(texts)
        shards.encode(DOCUMENTS)
        return sizes

    def augmented(self, index_scoring: str | None = None, **overrides):
        """bm25aug's query side as Searcher builds it, for a WordPiece index of its tokenizer (scored
        as the model was trained for, unless `index_scoring` says otherwise)."""
        index_scoring = index_scoring or self.settings["scoring"]
        from lsr_pyserini.encoders.query import AugmentedBm25Queries
        from lsr_pyserini.kernels.wordpiece_bm25 import write_tokenizer_record
        from lsr_pyserini.core.hf import load_tokenizer

        index = self.tmp / f"index-{index_scoring}"
        if not index.is_dir():
            index.mkdir()
            write_tokenizer_record(index, load_tokenizer(str(self.folder)), str(self.folder), index_scoring)
        return AugmentedBm25Queries(self.resolved(**overrides), str(index), overrides)

    def tilde(self, **lengths):
        from lsr_pyserini.models.tilde.model import TildeModel

        return TildeModel(str(self.folder), **lengths)

    def output(self, **overrides):
        """What the checkpoint encodes, everything a setting may change: floats and impacts."""
        if self.family == "bm25aug":
            return self.augmented(**overrides).queries(QUERY_IDS, QUERY_TEXTS), self.floats(**overrides)
        if self.family == "tilde":
            tilde = self.tilde(**overrides)
            return [tilde.log_likelihoods(DOCUMENTS[:3], "documents"), tilde.log_likelihoods(QUERY_TEXTS[:3], "queries")]
        return self.impacts(**overrides), self.floats(**overrides)


def same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return a == b


@pytest.fixture(scope="module")
def trained(tiny_mlm, tiny_encoder_only, ssr_model, negatives, tmp_path_factory):
    """(family, number) -> its checkpoint, trained on first use."""
    from lsr_pyserini.train.__main__ import main as train_main

    cases = {}

    def case(family, number) -> Case:
        if (family, number) not in cases:
            tmp = tmp_path_factory.mktemp(f"{family}-{number}")
            base = base_model(family, tmp, tiny_mlm, tiny_encoder_only, ssr_model)
            values = preset_values(family, TABLE[family][number], tmp, tiny_encoder_only)
            preset = tmp / f"{family}.yaml"
            preset.write_text(json.dumps({"family": family, "model": base, **values}))  # JSON is YAML
            train_main([family, "--queries", str(QUERIES), "--qrels", str(QRELS), "--corpus", str(CORPUS),
                        "--negatives", str(negatives), "--output", str(tmp / "checkpoint"), "--base", str(preset),
                        "--batch-size", "2", "--max-steps", "0", "--quiet"])
            if family == "bm25aug":  # a trained re-weighting, w(q) = 2 on every token (untrained: 1, as w = 1)
                from safetensors.torch import load_file, save_file

                heads = tmp / "checkpoint" / "bm25aug_heads.safetensors"
                state = load_file(str(heads))
                state["weight_head.bias"].fill_(2.0)
                save_file(state, str(heads))
            cases[(family, number)] = Case(family, tmp / "checkpoint", tmp)
        return cases[(family, number)]

    return case


@pytest.mark.parametrize("family, number", CASES, ids=[f"{f}-{n}" for f, n in CASES])
def test_every_setting_is_saved_reloaded_and_used(trained, family, number):
    case = trained(family, number)
    expected = {name: value.value if value.recorded is None else value.recorded
                for name, value in TABLE[family][number].items()}
    if family == "ssr":
        expected["backbone"] = str(case.tmp / "moved-backbone")
    recorded = json.loads((case.folder / "lsr_family.json").read_text())["config"]
    assert {name: recorded.get(name) for name in expected} == expected
    resolved = case.settings  # what --encoder DIR, load_encoder(DIR) and Searcher(encoder=DIR) resolve
    assert {name: resolved.get(name) for name in expected} == expected
    own = case.output()
    for name, value in TABLE[family][number].items():
        if value.differs:
            from lsr_pyserini.models.registry import schema_of

            baseline = schema_of(family)[name].default if value.baseline == "default" else value.baseline
            assert not same(case.output(**{name: baseline}), own), f"{family}: {name}={baseline} encodes the same"
        if value.check is not None:
            value.check(case, expected[name])
