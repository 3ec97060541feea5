"""The Python API against the commands on the sample collection: the same runs, identical.

BM25 and SPLADE-tiny impact search through `lsr_pyserini.Searcher`, on-the-fly query encoding
inside Pyserini's own `LuceneImpactSearcher`, and dense re-ranking with fusion through `Searcher`
against `rerank`. Runs are compared as the TREC lines the commands write.
"""
from __future__ import annotations

import re
import shutil

import pytest

from conftest import SAMPLE, run_tool
from lsr_pyserini.core.errors import InputError
from lsr_pyserini.core.readers import read_queries
from lsr_pyserini.core.writer import run_lines

QUERIES = SAMPLE / "queries.test.tsv"
CORPUS = SAMPLE / "corpus.jsonl"


@pytest.fixture(scope="module")
def sample_indexes(tmp_path_factory, tiny_encoder_only):
    """BM25 and SPLADE-tiny indexes of the sample, their CLI runs, and a dense store + CLI re-ranked run."""
    work = tmp_path_factory.mktemp("api")
    steps = [
        ("prepare", "corpus", "--input", CORPUS, "--output", work / "docs", "--quiet"),
        ("lucene", "index", "--collection", "JsonCollection", "--input", work / "docs", "--index", work / "bm25",
         "--generator", "DefaultLuceneDocumentGenerator", "--threads", "1"),
        ("lucene", "search", "--index", work / "bm25", "--topics", QUERIES, "--output", work / "run.bm25.txt",
         "--bm25", "--hits", "10"),
        ("encode", "corpus", "--input", CORPUS, "--output", work / "vectors", "--quiet"),
        ("encode", "queries", "--input", QUERIES, "--output", work / "queries.tsv", "--quiet"),
        ("lucene", "index", "--collection", "JsonVectorCollection", "--input", work / "vectors", "--index",
         work / "impact", "--generator", "DefaultLuceneDocumentGenerator", "--impact", "--pretokenized",
         "--threads", "1"),
        ("lucene", "search", "--index", work / "impact", "--topics", work / "queries.tsv", "--output",
         work / "run.splade.txt", "--impact", "--hits", "10"),
        ("encode", "dense", "--model", tiny_encoder_only, "--input", CORPUS, "--output", work / "dense",
         "--pooling", "mean", "--quiet"),
        ("rerank", "--reranker", "dense", "--run", work / "run.bm25.txt", "--queries", QUERIES, "--store",
         work / "dense", "--output", work / "run.fused.txt", "--interpolate", "0.5"),
    ]
    for tool, *args in steps:
        run_tool(tool, *args, check=True)
    return work


def as_lines(results: dict, tag: str) -> list[str]:
    return list(run_lines({qid: [(h.docid, h.score) for h in hits] for qid, hits in results.items()}, tag))


def queries():
    loaded = list(read_queries(str(QUERIES)))
    return [q.text for q in loaded], [q.id for q in loaded]


def test_query_encoder_gives_the_impacts_encode_queries_writes(sample_indexes):
    import lsr_pyserini

    encoder = lsr_pyserini.QueryEncoder("splade-tiny")
    written = {}
    for line in (sample_indexes / "queries.tsv").read_text().splitlines():
        qid, _, terms = line.partition("\t")
        written[qid] = {}
        for term in terms.split():
            written[qid][term] = written[qid].get(term, 0) + 1
    texts, qids = queries()
    assert {qid: encoder.encode(text) for qid, text in zip(qids, texts)} == written
    assert encoder.batch_encode(texts) == [written[qid] for qid in qids]


def test_searcher_and_pyserini_searcher_equal_the_command_line_runs(sample_indexes):
    import lsr_pyserini

    texts, qids = queries()
    cli_bm25 = (sample_indexes / "run.bm25.txt").read_text().splitlines(keepends=True)
    cli_splade = (sample_indexes / "run.splade.txt").read_text().splitlines(keepends=True)
    bm25 = lsr_pyserini.Searcher(str(sample_indexes / "bm25"))
    assert as_lines(bm25.batch_search(texts, qids, k=10), "Anserini") == cli_bm25
    splade = lsr_pyserini.Searcher(str(sample_indexes / "impact"), encoder="splade-tiny")
    assert as_lines(splade.batch_search(texts, qids, k=10, threads=2), "Anserini") == cli_splade
    one = splade.search(texts[0], k=3)
    assert [h.docid for h in one] == [line.split()[2] for line in cli_splade if line.startswith(f"{qids[0]} ")][:3]

    from pyserini.search.lucene import LuceneImpactSearcher

    pyserini_searcher = LuceneImpactSearcher(str(sample_indexes / "impact"),
                                             query_encoder=lsr_pyserini.QueryEncoder("splade-tiny"))
    hits = pyserini_searcher.batch_search(texts, qids, k=10, threads=1)
    assert list(run_lines({q: [(h.docid, h.score) for h in hits[q]] for q in qids}, "Anserini")) == cli_splade


def test_searcher_reranks_exactly_as_the_rerank_command(sample_indexes):
    import lsr_pyserini

    texts, qids = queries()
    searcher = lsr_pyserini.Searcher(str(sample_indexes / "bm25"), reranker="dense", store=str(sample_indexes / "dense"),
                                     interpolate=0.5, candidates=10)
    results = searcher.batch_search(texts, qids, k=10)
    assert as_lines(results, "dense+fused") == (sample_indexes / "run.fused.txt").read_text().splitlines(keepends=True)
    first = {line.split()[2]: float(line.split()[4]) for line in (sample_indexes / "run.bm25.txt").read_text().splitlines()
             if line.startswith(f"{qids[0]} ")}
    assert all(hit.first_stage_score == first[hit.docid] for hit in results[qids[0]])


def test_bad_settings_are_refused_in_one_line(sample_indexes, tmp_path):
    import lsr_pyserini

    with pytest.raises(InputError, match="setting 'poolin' is not read by the splade family"):
        lsr_pyserini.load_encoder("splade-tiny", poolin="max")
    with pytest.raises(InputError, match="--alpha is an option of the 'tilde' re-ranker, not of 'dense'"):
        lsr_pyserini.Searcher(str(sample_indexes / "bm25"), reranker="dense", store=str(sample_indexes / "dense"),
                              reranker_options={"alpha": 0.5})
    result = run_tool("rerank", "--reranker", "dense", "--run", sample_indexes / "run.bm25.txt", "--queries", QUERIES,
                      "--store", sample_indexes / "dense", "--output", tmp_path / "x.txt", "--cls-weight", "1")
    assert result.returncode == 2 and "--cls-weight is an option of the 'ssr' re-ranker" in result.stderr
    assert not (tmp_path / "x.txt").exists()


def test_a_changed_default_checkpoint_is_refused(tmp_path):
    """The splade-tiny preset pins its weights' SHA-256: other weights under the same name are refused."""
    import lsr_pyserini
    from lsr_pyserini.core.presets import load_preset, resolve_model

    preset = load_preset("splade-tiny")
    copy = tmp_path / "model"
    shutil.copytree(resolve_model(preset["model"]), copy)
    with open(copy / "model.safetensors", "r+b") as handle:
        handle.seek(-1, 2)
        last = handle.read(1)
        handle.seek(-1, 2)
        handle.write(bytes([last[0] ^ 1]))
    changed = tmp_path / "changed.yaml"
    text = (SAMPLE.parent / "presets" / "splade-tiny.yaml").read_text()
    changed.write_text(text.replace("python-package:cognition/model", str(copy)))
    with pytest.raises(InputError, match="model.safetensors has SHA-256 .* the preset pins 96e1dd8dbbc82439"):
        lsr_pyserini.load_encoder(str(changed))
    result = run_tool("encode", "queries", "--encoder", changed, "--input", QUERIES, "--output", tmp_path / "q.tsv")
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2 and len(lines) == 1 and "the preset pins" in lines[0]
    lsr_pyserini.load_encoder(str(changed), model=str(copy))  # weights named explicitly: not the preset's pin


def test_one_searcher_shared_by_threads_returns_the_one_query_rankings(sample_indexes):
    """8 threads, every sample query, 5 repetitions: the rankings of one query at a time, no exception
    (before every JVM call went to one thread, Pyserini's batch result failed intermittently here)."""
    from concurrent.futures import ThreadPoolExecutor

    import lsr_pyserini

    texts, _ = queries()
    for searcher in (lsr_pyserini.Searcher(str(sample_indexes / "impact"), encoder="splade-tiny"),
                     lsr_pyserini.Searcher(str(sample_indexes / "bm25"), reranker="dense",
                                           store=str(sample_indexes / "dense"), interpolate=0.5, candidates=10)):
        alone = [searcher.search(text, k=5) for text in texts * 4]
        with ThreadPoolExecutor(8) as pool:
            for _ in range(5):
                assert list(pool.map(lambda text: searcher.search(text, k=5), texts * 4)) == alone


def test_explanations_and_documents(sample_indexes):
    import lsr_pyserini
    from lsr_pyserini.core.errors import NotFound

    texts, qids = queries()
    impact = lsr_pyserini.Searcher(str(sample_indexes / "impact"), encoder="splade-tiny")
    for hits in impact.batch_search(texts, qids, k=10, explain=True).values():
        for hit in hits:  # integer impact scores: the sum is exact, the run score tie-adjusted below 1e-3
            assert round(hit.score) == sum(m.contribution for m in hit.terms) and hit.explained == "score"
            assert all(m.contribution == m.query_weight * m.document_weight for m in hit.terms)
    assert "cholesterol" in impact.doc("s2").lower()  # from the shards the index was built from
    with pytest.raises(NotFound, match="'nope': no such document"):
        impact.doc("nope")
    bm25 = lsr_pyserini.Searcher(str(sample_indexes / "bm25"))
    hit = bm25.search(texts[0], k=1, explain=True)[0]
    assert hit.terms and abs(sum(m.contribution for m in hit.terms) - hit.score) < 1e-3
    with pytest.raises(InputError, match="stores no document text"):
        bm25.doc(hit.docid)  # built without --storeRaw, from `prepare corpus` documents
    reranked = lsr_pyserini.Searcher(str(sample_indexes / "bm25"), reranker="dense", store=str(sample_indexes / "dense"),
                                     interpolate=0.5, candidates=10)
    hit = reranked.search(texts[0], k=1, explain=True)[0]
    assert hit.explained == "first_stage" and abs(sum(m.contribution for m in hit.terms) - hit.first_stage_score) < 1e-3


def test_wrong_pairings_are_refused_before_any_model_loads(sample_indexes, monkeypatch):
    import lsr_pyserini
    from lsr_pyserini import encoders

    def no_model(*_args, **_kwargs):
        raise AssertionError("a model was loaded before the refusal")

    monkeypatch.setattr(encoders, "build_encoder", no_model)
    monkeypatch.setattr("lsr_pyserini.encoders.query.build_encoder", no_model)
    cases = [
        ({"index": str(sample_indexes / "bm25"), "encoder": "splade-tiny"}, "is searched with BM25: a BM25 index takes no encoder"),
        ({"index": str(sample_indexes / "impact")}, "is an impact index: give the encoder"),
        ({"index": str(sample_indexes / "vectors"), "encoder": "splade-tiny"}, "vectors: not an index"),
        ({"index": str(sample_indexes / "nowhere"), "encoder": "splade-tiny"}, "nowhere: no such index folder"),
        ({"index": str(sample_indexes / "impact"), "encoder": "splade-tiny", "engine": "bm25"},
         "is an impact index: search it with engine 'lucene'"),
        ({"index": str(sample_indexes / "bm25"), "encoder": "splade-tiny", "engine": "lucene"}, "is a BM25 index"),
        ({"index": str(sample_indexes / "dense"), "encoder": "splade-tiny"}, "engine 'dense' encodes queries"),
        ({"index": [str(sample_indexes / "impact")] * 2, "encoder": "splade-tiny", "engine": "lucene"},
         "engine 'lucene' searches one index; several shard indexes: engine 'sharded'"),
    ]
    for kwargs, message in cases:
        with pytest.raises(InputError, match=message):
            lsr_pyserini.Searcher(**kwargs)


def test_a_copied_moved_or_renamed_impact_index_is_searched_as_the_original(sample_indexes, tiny_mlm, tmp_path):
    """An index carries its record inside its folder (lsr_index.json): a copy under another name in
    another folder gives the identical run, refuses BM25 and another encoder's queries as the
    original does; an index of before (INDEX.lsr.json beside it) reads as it did, and one with no
    record at all is examined (its norms): impact, so BM25 and no encoder are refused, not assumed."""
    import lsr_pyserini

    texts, qids = queries()
    expected = (sample_indexes / "run.splade.txt").read_text().splitlines(keepends=True)
    copy = tmp_path / "elsewhere" / "renamed"
    shutil.copytree(sample_indexes / "impact", copy)
    assert (copy / "lsr_index.json").is_file() and not (sample_indexes / "impact.lsr.json").exists()
    searcher = lsr_pyserini.Searcher(str(copy), encoder="splade-tiny")
    assert searcher.engine.name == "lucene"
    assert as_lines(searcher.batch_search(texts, qids, k=10), "Anserini") == expected
    for kwargs, message in [({}, "is an impact index: give the encoder"),
                            ({"engine": "bm25"}, r"is an impact index \(lsr_index.json in it\): search it with an encoder"),
                            ({"encoder": "splade-tiny", "encoder_options": {"model": str(tiny_mlm)}},
                             "its documents were encoded with preset 'splade-tiny'")]:
        with pytest.raises(InputError, match=message):
            lsr_pyserini.Searcher(str(copy), **kwargs)

    old = tmp_path / "old"  # an index built before: its record beside it
    shutil.copytree(sample_indexes / "impact", old)
    (old / "lsr_index.json").rename(tmp_path / "old.lsr.json")
    with pytest.raises(InputError, match=r"\(old.lsr.json beside it\)"):
        lsr_pyserini.Searcher(str(old), engine="bm25")
    searcher = lsr_pyserini.Searcher(str(old), encoder="splade-tiny")
    assert as_lines(searcher.batch_search(texts, qids, k=10), "Anserini") == expected

    bare = tmp_path / "bare"  # no record anywhere: examined
    shutil.copytree(sample_indexes / "impact", bare)
    (bare / "lsr_index.json").unlink()
    for kwargs, message in [({}, "is an impact index: give the encoder"),
                            ({"engine": "bm25"}, "is an impact index")]:
        with pytest.raises(InputError, match=message):
            lsr_pyserini.Searcher(str(bare), **kwargs)
    searcher = lsr_pyserini.Searcher(str(bare), encoder="splade-tiny")
    assert as_lines(searcher.batch_search(texts, qids, k=10), "Anserini") == expected
    # which encoder, examined: the sample-vocabulary model's tokens hold few of splade-tiny's terms
    with pytest.raises(InputError, match=r"records no encoder, and its terms are not encoder .*'s vocabulary"):
        lsr_pyserini.Searcher(str(bare), encoder="splade-tiny", encoder_options={"model": str(tiny_mlm)})
    text = tmp_path / "text"  # a BM25 index without its record: examined as BM25
    shutil.copytree(sample_indexes / "bm25", text)
    (text / "lsr_index.json").unlink()
    assert lsr_pyserini.Searcher(str(text)).engine.name == "bm25"
    with pytest.raises(InputError, match="is a BM25 index: search it with engine 'bm25'"):
        lsr_pyserini.Searcher(str(text), engine="lucene")  # it once said "an impact index"
    with pytest.raises(InputError, match="is a BM25 index"):
        lsr_pyserini.Searcher(str(text), encoder="splade-tiny", engine="lucene")


def test_an_index_whose_kind_cannot_be_told_is_refused_not_assumed(tmp_path):
    """No record, every norm 1 and every term frequency 1 (impacts of 1; or BM25 over one-word
    documents): neither BM25 nor impacts is assumed, with an encoder or without."""
    import json

    import lsr_pyserini

    vectors = tmp_path / "vectors"
    vectors.mkdir()
    (vectors / "part-0.jsonl").write_text("".join(
        json.dumps({"id": f"d{i}", "contents": "", "vector": {word: 1}}) + "\n"
        for i, word in enumerate(["alpha", "beta", "gamma"])))
    run_tool("lucene", "index", "--collection", "JsonVectorCollection", "--input", vectors, "--index",
             tmp_path / "unit", "--generator", "DefaultLuceneDocumentGenerator", "--impact", "--pretokenized",
             "--threads", "1", check=True)
    (tmp_path / "unit" / "lsr_index.json").unlink(missing_ok=True)
    for kwargs in [{}, {"encoder": "splade-tiny"}, {"engine": "bm25"}, {"engine": "lucene", "encoder": "splade-tiny"}]:
        with pytest.raises(InputError, match="cannot tell whether it holds impacts or BM25 term frequencies"):
            lsr_pyserini.Searcher(str(tmp_path / "unit"), **kwargs)


def test_search_command_equals_the_commands_and_refuses_bad_input_in_one_line(sample_indexes, tmp_path):
    from conftest import error_lines

    run_tool("search", "--index", sample_indexes / "impact", "--topics", sample_indexes / "queries.tsv", "--encoded",
             "--output", tmp_path / "a.txt", "--hits", "10", check=True)
    assert (tmp_path / "a.txt").read_text() == (sample_indexes / "run.splade.txt").read_text()
    run_tool("search", "--index", sample_indexes / "bm25", "--topics", QUERIES, "--output", tmp_path / "b.txt",
             "--hits", "10", "--threads", "2", check=True)
    assert (tmp_path / "b.txt").read_text() == (sample_indexes / "run.bm25.txt").read_text()
    run_tool("search", "--index", sample_indexes / "dense", "--topics", QUERIES, "--output", tmp_path / "c.txt",
             "--hits", "10", check=True)
    run_tool("search_dense", "--store", sample_indexes / "dense", "--queries", QUERIES, "--output", tmp_path / "d.txt",
             "--hits", "10", check=True)
    assert (tmp_path / "c.txt").read_text() == (tmp_path / "d.txt").read_text()
    for args, message in [
        (("--index", tmp_path / "nowhere", "--topics", QUERIES), "nowhere: no such index folder"),
        (("--index", sample_indexes / "vectors", "--topics", QUERIES, "--encoder", "splade-tiny"), "not an index"),
        (("--index", sample_indexes / "impact", "--topics", tmp_path / "none.tsv", "--encoder", "splade-tiny"),
         "none.tsv"),
        (("--index", sample_indexes / "impact", "--topics", QUERIES), "is an impact index: give the encoder"),
        (("--index", f"{sample_indexes / 'impact'},{tmp_path / 'gone'}", "--topics", QUERIES, "--encoder", "splade-tiny"),
         "gone: no such index folder"),
    ]:
        result = run_tool("search", *args, "--output", tmp_path / "x.txt")
        assert result.returncode == 2 and len(error_lines(result)) == 1 and message in error_lines(result)[0], \
            result.stderr
        assert not (tmp_path / "x.txt").exists()


def test_an_impact_index_refuses_another_encoders_queries_before_loading_it(sample_indexes, tiny_mlm, monkeypatch):
    """The index's record names its documents' encoder (lsr_index.json, or the shards' manifest it
    points to); a query encoder of another model is one line, before that model loads, naming the
    preset the user knows (not the package's internal `python-package:` reference) and the flag."""
    import lsr_pyserini

    monkeypatch.setattr("lsr_pyserini.encoders.query.build_encoder", lambda *_: pytest.fail("a model was loaded"))
    with pytest.raises(InputError, match=re.escape(f"its documents were encoded with preset 'splade-tiny', not model "
                                                   f"'{tiny_mlm}': search it with the encoder of its documents "
                                                   f"(--encoder splade-tiny)")):
        lsr_pyserini.Searcher(str(sample_indexes / "impact"), encoder="splade-tiny", encoder_options={"model": str(tiny_mlm)})


def test_encoder_options_are_the_query_encoders_declared_settings_for_every_family(sample_indexes, monkeypatch):
    """`encoder_options` means one thing: overrides of the query encoder's declared settings. A dense
    store (built by the old `--pooling` flag of `encode dense`) takes those of its family a query side
    may set; its documents' settings, another family's or any setting without a query encoder are one
    line; a bm25aug checkpoint's `query_impact_scale` is its boost scale."""
    import lsr_pyserini
    from lsr_pyserini.encoders.query import AugmentedBm25Queries

    dense = lsr_pyserini.Searcher(str(sample_indexes / "dense"), encoder_options={"batch_size": 3, "model": None})
    assert dense.query_side.batch_size == 3 and dense.query_side.store.encoder_settings["pooling_mode"] == "mean"
    for options, message in [
        ({"pooling_mode": "cls"}, "'pooling_mode' is a setting of the store's documents; a dense store's query side "
                                  "takes model, batch_size"),
        ({"boost_scale": 2}, "'boost_scale' is not a setting of the dense family"),
        ({"batch_size": 0}, "batch_size: "),
    ]:
        with pytest.raises(InputError, match=re.escape(message)):
            lsr_pyserini.Searcher(str(sample_indexes / "dense"), encoder_options=options)
    with pytest.raises(InputError, match="encoder_options 'batch_size': no query encoder to set"):
        lsr_pyserini.Searcher(str(sample_indexes / "bm25"), encoder_options={"batch_size": 3})
    from lsr_pyserini.models.resolve import resolve_settings

    with pytest.raises(InputError, match="boost_scale"):  # AugmentedQueries' own option: not a declared setting
        resolve_settings("splade-tiny", {"boost_scale": 2}, "encoder_options")

    made = {}
    monkeypatch.setattr("lsr_pyserini.models.bm25aug.model.AugmentedQueries",
                        lambda model, index, **options: made.update(options, model=model))
    settings = {"family": "bm25aug", "model": "m", "impact_scale": 100, "query_impact_scale": 40, "augment": True,
                "weighting": True, "batch_size": 32}
    AugmentedBm25Queries(settings, "index", {"query_impact_scale": 40, "augment": False, "model": "m"})
    assert made == {"boost_scale": 40, "augment": False, "model": "m"}
    made.clear()
    AugmentedBm25Queries(settings, "index", {})  # nothing given: the checkpoint's own (AugmentedQueries' defaults)
    assert made == {"model": "m"}


def test_search_dense_and_rerank_take_their_tag_and_threads(sample_indexes, tmp_path):
    """--tag names the run; --threads sets torch's thread count for the query encoder and re-ranker
    (read back after each command: this process runs them)."""
    import torch

    from lsr_pyserini.commands.rerank import main as rerank_main
    from lsr_pyserini.core.outputs import release_outputs
    from lsr_pyserini.engines.dense.command import main as search_dense_main

    def tags(path):
        return {line.split()[5] for line in path.read_text().splitlines()}

    try:
        search_dense_main(["--store", str(sample_indexes / "dense"), "--queries", str(QUERIES), "--hits", "3",
                           "--output", str(tmp_path / "dense.txt"), "--tag", "mine", "--threads", "3"])
        assert tags(tmp_path / "dense.txt") == {"mine"} and torch.get_num_threads() == 3
        rerank_main(["--reranker", "dense", "--run", str(sample_indexes / "run.bm25.txt"), "--queries", str(QUERIES),
                     "--store", str(sample_indexes / "dense"), "--output", str(tmp_path / "reranked.txt"),
                     "--tag", "ours", "--threads", "2"])
        assert tags(tmp_path / "reranked.txt") == {"ours"} and torch.get_num_threads() == 2
    finally:
        release_outputs()
