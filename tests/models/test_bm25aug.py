"""BM25 query augmentation: the generated queries' Lucene BM25 scores are the model's formula,
training runs through the shared path, and bad input stops with one line."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from conftest import SAMPLE, build_tiny_bert, run_tool
from lsr_pyserini.core.readers import read_run
from lsr_pyserini.kernels.wordpiece_bm25 import lucene_length

SCALE = 100


def command(capsys, *argv, tool: str = "bm25aug") -> tuple[int, str]:
    """Run `python -m lsr_pyserini.TOOL ARGV` in this process (no JVM involved); (exit status, stderr)."""
    from lsr_pyserini.commands.bm25aug import main as bm25aug_main
    from lsr_pyserini.core.cli import run_main
    from lsr_pyserini.train.__main__ import main as train_main

    entry = {"bm25aug": bm25aug_main, "train": train_main}[tool]
    capsys.readouterr()
    try:
        run_main(lambda: entry([str(a) for a in argv]))
        status = 0
    except SystemExit as exit_:
        status = exit_.code
    return status, capsys.readouterr().err


@pytest.fixture(scope="module")
def tiny_body(tmp_path_factory):
    return build_tiny_bert(tmp_path_factory.mktemp("bm25aug-body"), with_mlm_head=False, seed=3)


@pytest.fixture(scope="module")
def wordpiece_index(tmp_path_factory, tiny_body):
    index = tmp_path_factory.mktemp("bm25aug") / "index"
    run_tool("bm25aug", "index", "--model", tiny_body, "--input", SAMPLE / "corpus.jsonl", "--index", index, check=True)
    return index


@pytest.fixture(scope="module")
def random_heads_model(tmp_path_factory, tiny_body):
    """A bm25aug checkpoint whose heads give visible augmentation and uneven term weights."""
    from lsr_pyserini.models.bm25aug.model import QueryAugmenter

    model = QueryAugmenter.load(str(tiny_body))
    torch.manual_seed(0)
    with torch.no_grad():
        model.augment_head.weight.normal_(0, 0.3)
        model.augment_head.bias.fill_(-0.2)
        model.weight_head.weight.normal_(0, 0.3)
    folder = tmp_path_factory.mktemp("bm25aug-model")
    model.save(folder)  # records scoring bm25, k1 and b: the defaults
    return folder


def search(index, topics, output, *flags):
    run_tool("lucene", "search", "--index", index, "--topics", topics, "--output", output, "--hits", 100,
             "--pretokenized", *flags, check=True)
    return read_run(str(output))


def test_lucene_scores_equal_the_model_formula(tmp_path, capsys, tiny_body, wordpiece_index, random_heads_model):
    """Also shows that n repetitions of a term in a --pretokenized --bm25 query give it boost n."""
    from lsr_pyserini.core.readers import read_queries
    from lsr_pyserini.models.bm25aug.model import QueryAugmenter
    from lsr_pyserini.kernels.wordpiece_bm25 import CorpusVectors

    topics = tmp_path / "queries.tsv"
    assert command(capsys, "queries", "--model", random_heads_model, "--index", wordpiece_index,
                   "--input", SAMPLE / "queries.test.tsv", "--output", topics, "--boost-scale", SCALE)[0] == 0
    run = search(wordpiece_index, topics, tmp_path / "run.txt", "--bm25")
    model = QueryAugmenter.load(str(random_heads_model)).eval()
    queries = list(read_queries(str(SAMPLE / "queries.test.tsv")))
    with torch.no_grad():
        boosts, bow, augmentation = model([q.text for q in queries])
    assert (augmentation > 1 / SCALE).sum() > len(queries)  # the heads really augment
    documents = CorpusVectors(str(SAMPLE / "corpus.jsonl"), model.tokenizer, 0.9, 0.4, bm25=True)
    lines = dict(line.rstrip("\n").split("\t") for line in topics.read_text().splitlines())
    vocab = model.tokenizer.get_vocab()
    compared = 0
    for row, query in enumerate(queries):
        integer = torch.zeros(boosts.shape[1])
        for term in lines[query.id].split():
            integer[vocab[term]] += 1
        assert torch.allclose(integer / SCALE, boosts[row], atol=0.5 / SCALE + 1e-6)
        for docid, lucene_score in run[query.id]:
            vector = documents.matrix([docid])[0]
            # exact but for float32 and the run file's 4 decimals: the BM25 statistics agree
            assert lucene_score == pytest.approx(float(integer @ vector), rel=1e-5, abs=1e-4)
            bound = float((0.5 / SCALE) * vector.sum())  # rounding each boost moves the score at most this
            assert abs(lucene_score / SCALE - float(boosts[row] @ vector)) <= bound + 1e-4
            compared += 1
    assert compared > 20


def test_norm_quantisation_matches_lucene():
    lengths = [0, 1, 23, 24, 25, 31, 40, 57, 100, 255, 1000, 4097, 123456]
    code = ("import json,sys; from lsr_pyserini.core.jvm import start_jvm; start_jvm(); from jnius import autoclass; "
            "S=autoclass('org.apache.lucene.util.SmallFloat'); "
            f"print(json.dumps([S.byte4ToInt(S.intToByte4(n)) for n in {lengths}]))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == [lucene_length(n) for n in lengths]


def test_ablations_and_plain_wordpiece_queries(tmp_path, capsys, tiny_body, wordpiece_index, random_heads_model):
    def generate(name, model, *flags):
        out = tmp_path / f"{name}.tsv"
        assert command(capsys, "queries", "--model", model, "--index", wordpiece_index, "--input",
                       SAMPLE / "queries.test.tsv", "--output", out, *flags, "--boost-scale", 1)[0] == 0
        return dict(line.split("\t") for line in out.read_text().splitlines())

    plain = generate("plain", tiny_body, "--no-augmentation", "--no-weighting")
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_body))
    queries = dict(line.split("\t") for line in (SAMPLE / "queries.test.tsv").read_text().splitlines())
    assert {q: sorted(t.split()) for q, t in plain.items()} == {q: sorted(tokenizer.tokenize(t)) for q, t in queries.items()}
    reweighted = generate("reweighted", random_heads_model, "--no-augmentation")
    assert all(set(reweighted[q].split()) <= set(plain[q].split()) for q in plain)
    assert reweighted != plain
    augmented = generate("augmented", random_heads_model, "--no-weighting")
    assert any(set(augmented[q].split()) - set(plain[q].split()) for q in plain)


def test_training_runs_and_saves_a_servable_model(tmp_path, capsys, tiny_body, wordpiece_index):
    negatives = tmp_path / "negatives.txt"
    topics = tmp_path / "plain.tsv"
    assert command(capsys, "queries", "--model", tiny_body, "--index", wordpiece_index, "--input",
                   SAMPLE / "queries.test.tsv", "--output", topics, "--no-augmentation", "--no-weighting")[0] == 0
    search(wordpiece_index, topics, negatives, "--bm25")
    output = tmp_path / "trained"
    common = ["--base", tiny_body, "--queries", SAMPLE / "queries.test.tsv", "--qrels", SAMPLE / "qrels.test.trec",
              "--corpus", SAMPLE / "corpus.jsonl", "--negatives", negatives, "--quiet"]
    assert command(capsys, "bm25aug", *common, "--output", output, "--batch-size", 2, "--group-size", 3,
                   "--epochs", 2, "--lr", 1e-3, "--lambda-aug", 0.025, tool="train")[0] == 0
    family = json.loads((output / "lsr_family.json").read_text())
    assert family["family"] == "bm25aug" and set(family) == {"family", "config"}
    assert (family["config"]["scoring"], family["config"]["k1"], family["config"]["b"]) == ("bm25", 0.9, 0.4)
    from safetensors.torch import load_file

    heads = load_file(str(output / "bm25aug_heads.safetensors"))
    assert float(heads["weight_head.weight"].abs().sum()) > 0  # the re-weighting head was trained
    status, err = command(capsys, "queries", "--model", output, "--index", wordpiece_index, "--input",
                          SAMPLE / "queries.test.tsv", "--output", tmp_path / "trained.tsv")
    assert status == 0 and "augmented tokens per query" in err
    # a bag-of-words model is refused on a BM25 index
    bow = tmp_path / "bow"
    assert command(capsys, "bm25aug", *common, "--output", bow, "--batch-size", 2, "--max-steps", 1, "--no-bm25",
                   tool="train")[0] == 0
    status, err = command(capsys, "queries", "--model", bow, "--index", wordpiece_index, "--input",
                          SAMPLE / "queries.test.tsv", "--output", tmp_path / "bow.tsv")
    assert status == 2 and len(err.strip().splitlines()) == 1 and "'bow' scoring" in err, err


def test_scoring_k1_and_b_are_declared_saved_and_used(tmp_path, capsys, tiny_body, wordpiece_index):
    """`train bm25aug --max-steps 0 --scoring bow --k1 1.5 --b 0.6`: the three recorded in the config (none
    beside it), back on reload, and used: `bm25aug queries` refuses the BM25 index for a bag-of-words
    model, and the model's k1 and b are what a search takes (`AugmentedQueries.bm25`, `Searcher`). A
    checkpoint written before (the three beside the config) loads to the same settings."""
    from lsr_pyserini.models.bm25aug.model import AugmentedQueries, QueryAugmenter
    from lsr_pyserini.models.configs import resolve_settings

    negatives = tmp_path / "negatives.txt"
    qids = [line.split("\t")[0] for line in (SAMPLE / "queries.test.tsv").read_text().splitlines()]
    negatives.write_text("".join(f"{q} Q0 s{d} {d} {20 - d} bm25\n" for q in qids for d in range(1, 13)))
    common = ["--base", tiny_body, "--queries", SAMPLE / "queries.test.tsv", "--qrels", SAMPLE / "qrels.test.trec",
              "--corpus", SAMPLE / "corpus.jsonl", "--negatives", negatives, "--quiet", "--max-steps", 0,
              "--batch-size", 2]
    chosen = {"scoring": "bow", "k1": 1.5, "b": 0.6}
    bow = tmp_path / "bow"
    assert command(capsys, "bm25aug", *common, "--output", bow, "--scoring", "bow", "--k1", 1.5, "--b", 0.6,
                   tool="train")[0] == 0
    marker = json.loads((bow / "lsr_family.json").read_text())
    assert set(marker) == {"family", "config"} and {k: marker["config"][k] for k in chosen} == chosen
    assert {k: resolve_settings(str(bow))[k] for k in chosen} == chosen
    model = QueryAugmenter.load(str(bow))
    assert (model.scoring, model.k1, model.b) == ("bow", 1.5, 0.6)
    with pytest.raises(Exception, match="trained for 'bow' scoring"):
        AugmentedQueries(str(bow), str(wordpiece_index))
    # --no-bm25 is --scoring bow; a BM25 model carries its k1 and b to the search
    ablation = tmp_path / "ablation"
    assert command(capsys, "bm25aug", *common, "--output", ablation, "--no-bm25", tool="train")[0] == 0
    assert json.loads((ablation / "lsr_family.json").read_text())["config"]["scoring"] == "bow"
    bm25 = tmp_path / "bm25"
    assert command(capsys, "bm25aug", *common, "--output", bm25, "--k1", 1.5, "--b", 0.6, tool="train")[0] == 0
    assert AugmentedQueries(str(bm25), str(wordpiece_index)).bm25 == (1.5, 0.6)
    # a checkpoint of before: scoring, k1 and b beside the config
    old = tmp_path / "old"
    old.mkdir()
    for file in bow.iterdir():
        if file.name != "lsr_family.json":
            (old / file.name).write_bytes(file.read_bytes())
    config = {k: v for k, v in marker["config"].items() if k not in chosen}
    (old / "lsr_family.json").write_text(json.dumps({"family": "bm25aug", "augment": True, "weighting": True,
                                                     "query_max_length": 64, **chosen, "uniform_penalty": False,
                                                     "lambda_aug": 0.1, "config": config}))
    assert {k: resolve_settings(str(old))[k] for k in chosen} == chosen
    reloaded = QueryAugmenter.load(str(old))
    assert (reloaded.scoring, reloaded.k1, reloaded.b) == ("bow", 1.5, 0.6)


@pytest.mark.slow  # an end-to-end run of the commands (docs/ci.md: slow tier)
def test_bag_of_words_index_scores_binary_matches(tmp_path, tiny_body):
    index = tmp_path / "bow-index"
    run_tool("bm25aug", "index", "--model", tiny_body, "--input", SAMPLE / "corpus.jsonl", "--index", index,
             "--scoring", "bow", check=True)
    topics = tmp_path / "q.tsv"
    topics.write_text("q\tvitamin vitamin bone\n")
    run = search(index, topics, tmp_path / "run.txt", "--impact")
    corpus = {json.loads(line)["_id"]: json.loads(line) for line in (SAMPLE / "corpus.jsonl").read_text().splitlines()}
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_body))
    for docid, score in run["q"]:
        tokens = set(tokenizer.tokenize(corpus[docid]["title"] + " " + corpus[docid]["text"]))
        assert score == pytest.approx(2 * ("vitamin" in tokens) + ("bone" in tokens))


@pytest.mark.parametrize("case", ["nothing", "tokenizer", "overflow"])
def test_bad_input_stops_with_one_line(tmp_path, capsys, tiny_body, wordpiece_index, random_heads_model, case):
    queries = tmp_path / "queries.tsv"
    queries.write_text("q1\tvitamin d\nq2\t\u2603\u2603\n" if case == "nothing" else "q1\tvitamin d bones\n")
    model, flags = random_heads_model, []
    if case == "tokenizer":
        model, flags = "splade-tiny", ["--no-augmentation", "--no-weighting"]
    if case == "overflow":
        flags = ["--boost-scale", "1e9"]
    output = tmp_path / "out.tsv"
    status, err = command(capsys, "queries", "--model", model, "--index", wordpiece_index, "--input", queries,
                          "--output", output, "--quiet", *flags)
    lines = [line for line in err.splitlines() if line.strip()]
    assert status == 2 and len(lines) == 1 and lines[0].startswith("error: "), err
    assert {"nothing": "'q2' tokenizes to nothing", "tokenizer": "differs from the tokenizer",
            "overflow": "above --max-boost"}[case] in lines[0]
    assert not output.exists()


def test_query_boosts_keep_the_largest_and_refuse_overflow():
    from lsr_pyserini.models.bm25aug.model import query_boosts
    from lsr_pyserini.core.readers import InputError

    boosts, trimmed = query_boosts(["q"], [{"a": 0.031, "b": 0.02, "c": 0.004, "##d": 0.05}], 100, 10, 2)
    assert trimmed == 1 and boosts == [{"##d": 5, "a": 3}]
    with pytest.raises(InputError, match="boost 11 .* above --max-boost 10"):
        query_boosts(["q"], [{"a": 0.11}], 100, 10, 5)


def test_index_model_shard_size_threads_and_overwrite_are_used(tmp_path, capsys, monkeypatch):
    """`bm25aug index` with Lucene's indexing recorded (not run): --model is the tokenizer recorded,
    --shard-size cuts the token shards, --threads reaches Lucene, --overwrite replaces an index
    refused without it."""
    from pathlib import Path

    from lsr_pyserini.commands import bm25aug as bm25aug_command

    lucene = []

    def record(command, **kwargs):
        lucene.append(command)
        built = Path(command[command.index("--index") + 1])
        built.mkdir()
        (built / "segments_1").touch()  # what makes a folder a Lucene index to --overwrite
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(bm25aug_command.subprocess, "run", record)
    index = tmp_path / "index"
    common = ["index", "--input", SAMPLE / "corpus.jsonl", "--index", index, "--quiet"]
    model = "python-package:cognition/model"  # splade-tiny's checkpoint, named as a checkpoint
    assert command(capsys, *common, "--model", model, "--shard-size", 5, "--threads", 2)[0] == 0
    assert json.loads((index / "lsr_tokenizer.json").read_text())["model"] == model
    shards = lambda: sorted((tmp_path / "index.docs").glob("*.jsonl"))  # noqa: E731
    assert len(shards()) == 3 and lucene[0][lucene[0].index("--threads") + 1] == "2"
    status, error = command(capsys, *common)
    assert status == 2 and "--overwrite" in error and len(lucene) == 1
    assert command(capsys, *common, "--overwrite")[0] == 0
    assert len(shards()) == 1 and json.loads((index / "lsr_tokenizer.json").read_text())["model"] == "splade-tiny"


def test_queries_max_terms_threads_dtype_device_and_overwrite_are_used(tmp_path, capsys, wordpiece_index,
                                                                       random_heads_model):
    output = tmp_path / "queries.tsv"
    common = ["queries", "--model", random_heads_model, "--index", wordpiece_index, "--input",
              SAMPLE / "queries.test.tsv", "--quiet"]
    assert command(capsys, *common, "--output", output)[0] == 0
    every = dict(line.split("\t") for line in output.read_text().splitlines())
    status, error = command(capsys, *common, "--output", output, "--max-terms", 2, "--threads", 1)
    assert status == 2 and "--overwrite" in error
    status, error = command(capsys, *common, "--output", output, "--max-terms", 2, "--threads", 1, "--overwrite")
    assert status == 0 and torch.get_num_threads() == 1
    trimmed = dict(line.split("\t") for line in output.read_text().splitlines())
    assert all(len(set(terms.split())) <= 2 for terms in trimmed.values())
    assert any(len(set(terms.split())) > 2 for terms in every.values())
    assert command(capsys, *common, "--output", tmp_path / "bf16.tsv", "--dtype", "bfloat16")[0] == 0
    assert dict(line.split("\t") for line in (tmp_path / "bf16.tsv").read_text().splitlines()) != every
    status, error = command(capsys, *common, "--output", tmp_path / "absent.tsv", "--device", "cuda:99")
    assert status == 2 and "cuda:99" in error
