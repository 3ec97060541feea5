"""PISA, the exact engine with dynamic pruning (`[pisa]` extra): on the sample collection encoded
with SPLADE-tiny, the PISA run equals the Lucene run line for line with every exact algorithm;
`Searcher` chooses it from the folder and equals the command; ties are ordered by docid beyond k;
8 threads give the sequential rankings; the build resumes after an interruption; the missing extra
and bad inputs are one line each. (All 300 SciFact test queries at depth 1000: tests/scifact_engines.py.)"""
from __future__ import annotations

import hashlib
import json
import re
import sys

import pytest

from conftest import SAMPLE, encoded_sample, error_lines, run_tool
from lsr_pyserini.core.errors import InputError
from lsr_pyserini.core.outputs import release_outputs
from lsr_pyserini.core.readers import read_queries
from lsr_pyserini.engines.pisa import index as engine
from lsr_pyserini.stores.vectors import read_impact_queries
from test_seismic import brute_force, tied_collection, without_tag, write_shard

QUERIES = SAMPLE / "queries.test.tsv"

engine.require_pisa()  # pinned (pyterrier-pisa): a broken install fails, not skips


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    """SPLADE-tiny vectors of the sample, its Lucene and PISA indexes and their full runs."""
    work = tmp_path_factory.mktemp("pisa")
    return encoded_sample(work, ("pisa", "index", "--input", work / "vectors", "--index", work / "pisa", "--quiet"))


def test_every_exact_algorithm_gives_the_lucene_run_line_for_line(sample):
    lucene = without_tag(sample / "run.lucene.txt")
    assert len(lucene) > 20 and len({line.split()[0] for line in lucene}) == 7
    for algorithm in engine.EXACT_ALGORITHMS:
        output = sample / f"run.pisa.{algorithm}.txt"
        result = run_tool("pisa", "search", "--index", sample / "pisa", "--topics", sample / "queries.tsv", "--output",
                          output, "--hits", "1000", "--algorithm", algorithm, "--threads", "8" if algorithm ==
                          "maxscore" else "1", check=True)
        assert f"{algorithm}) into" in result.stderr and not error_lines(result)
        assert without_tag(output) == lucene, algorithm
    manifest = json.loads((sample / "pisa" / "pisa.json").read_text())
    assert manifest["documents"] == 12 and manifest["encoder"]["family"] == "splade"
    assert manifest["input_manifest"]["status"] == "complete"
    assert not (sample / "pisa.partial").exists() and not (sample / "pisa.building").exists()
    # the conjunctive algorithms keep only the documents holding every query term
    searcher = engine.PisaIndex(str(sample / "pisa"), "ranked_and")
    queries = read_impact_queries(str(sample / "queries.tsv"))
    conjunctive = searcher.search(queries, 1000)
    assert not searcher.exact and sum(map(len, conjunctive.values())) < len(lucene)


def test_searcher_chooses_pisa_from_the_folder_explains_and_gives_texts(sample):
    import lsr_pyserini

    loaded = list(read_queries(str(QUERIES)))
    texts, qids = [q.text for q in loaded], [q.id for q in loaded]
    searcher = lsr_pyserini.Searcher(str(sample / "pisa"), encoder="splade-tiny")
    assert searcher.engine.name == "pisa" and searcher.engine.describe()["exact"]
    expected = {}
    for line in without_tag(sample / "run.lucene.txt"):
        qid, _, docid, _, score = line.split()
        expected.setdefault(qid, []).append((docid, float(score)))
    for threads in (1, 2):
        got = searcher.batch_search(texts, qids, k=5, threads=threads)
        assert {qid: [(h.docid, h.score) for h in hits] for qid, hits in got.items()} == \
            {qid: expected.get(qid, [])[:5] for qid in qids}
    hits = searcher.search(texts[0], k=3, explain=True)
    assert hits and all(sum(m.contribution for m in hit.terms) == hit.score for hit in hits)
    assert searcher.doc(hits[0].docid).strip()
    with pytest.raises(InputError, match="engine 'pisa' has no option 'heap_factor'"):
        lsr_pyserini.Searcher(str(sample / "pisa"), encoder="splade-tiny", engine_options={"heap_factor": 1.0})
    with pytest.raises(InputError, match="algorithm 'fast': expected one of maxscore"):
        lsr_pyserini.Searcher(str(sample / "pisa"), encoder="splade-tiny", engine_options={"algorithm": "fast"})
    with pytest.raises(InputError, match="its documents were encoded with preset 'splade-tiny', not model"):
        lsr_pyserini.Searcher(str(sample / "pisa"), encoder="splade-tiny", encoder_options={"model": str(SAMPLE)})
    with pytest.raises(InputError, match="not a PISA index"):
        lsr_pyserini.Searcher(str(sample / "lucene"), encoder="splade-tiny", engine="pisa")


def test_ties_are_ordered_by_docid_even_beyond_k_and_across_threads(tmp_path):
    vectors = tied_collection()
    engine.build_pisa_index(str(write_shard(tmp_path / "v", vectors)), str(tmp_path / "ix"))
    for algorithm in engine.EXACT_ALGORITHMS:
        searcher = engine.PisaIndex(str(tmp_path / "ix"), algorithm)
        queries = [("q1", {"a": 1}), ("q2", {"a": 3, "b": 1, "c": 2}), ("q3", {"c": 5, "zzz": 4}),
                   ("q4", {"unknown": 3})]
        for k in (1, 7, 20, 21, 100):
            expected = {qid: brute_force(vectors, query, k) for qid, query in queries}
            assert searcher.search(queries, k) == expected, (algorithm, k)
            assert searcher.search(queries, k, threads=8) == expected, (algorithm, k)


def test_an_interrupted_build_resumes_from_its_finished_shards(tmp_path, monkeypatch):
    vectors = {f"d{i:03d}": {"a": i % 5 + 1, f"t{i % 7}": 2} for i in range(90)}
    shards = tmp_path / "v"
    for number in range(3):  # three shards of 30
        write_shard(tmp_path / f"s{number}", dict(list(vectors.items())[30 * number: 30 * number + 30]))
        shards.mkdir(exist_ok=True)
        (tmp_path / f"s{number}" / "part-00000.jsonl").rename(shards / f"part-{number:05d}.jsonl")
    read = []
    original = engine._read_part

    def interrupted(path, *args):
        read.append(path.name)
        if len(read) == 2:
            raise KeyboardInterrupt
        return original(path, *args)

    monkeypatch.setattr(engine, "_read_part", interrupted)
    with pytest.raises(KeyboardInterrupt):
        engine.build_pisa_index(str(shards), str(tmp_path / "ix"))
    assert not (tmp_path / "ix").exists() and (tmp_path / "ix.partial").is_dir()
    manifest = engine.build_pisa_index(str(shards), str(tmp_path / "ix"))
    assert read == ["part-00000.jsonl", "part-00001.jsonl", "part-00001.jsonl", "part-00002.jsonl"]
    assert manifest["documents"] == 90 and not (tmp_path / "ix.partial").exists()
    searcher = engine.PisaIndex(str(tmp_path / "ix"))
    query = {"a": 2, "t3": 1}
    assert searcher.search([("q", query)], 40)["q"] == brute_force(vectors, query, 40)


def test_the_missing_extra_is_one_line_naming_it(tmp_path, monkeypatch):
    from lsr_pyserini.engines.pisa.command import main

    monkeypatch.delitem(sys.modules, "pyterrier_pisa._pisathon")
    monkeypatch.setattr(engine.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(InputError, match=r"pip install 'lsr-pyserini\[pisa\]'"):
        main(["index", "--input", str(tmp_path), "--index", str(tmp_path / "ix")])
    (tmp_path / "pisa.json").write_text(json.dumps({"format": engine.FORMAT}))
    with pytest.raises(InputError, match=r"pip install 'lsr-pyserini\[pisa\]'"):
        engine.PisaIndex(str(tmp_path))


def test_bad_inputs_are_one_line_and_create_nothing(sample, tmp_path):
    shards = write_shard(tmp_path / "v", {"d1": {"a": 1}})
    fractional = write_shard(tmp_path / "frac", {"d1": {"a": 1.5}})
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "notes.txt").write_text("mine")
    (tmp_path / "q.tsv").write_text("no tab here\n")
    mixed = tmp_path / "mixed"  # the sample's shards with another encoding's shard copied in
    mixed.mkdir()
    for path in (sample / "vectors").iterdir():
        (mixed / path.name).write_bytes(path.read_bytes())
    (mixed / "part-00001.jsonl").write_text((shards / "part-00000.jsonl").read_text())
    (tmp_path / "mixed.manifest.json").write_text((sample / "vectors.manifest.json").read_text())
    unfinished = tmp_path / "unfinished"
    unfinished.mkdir()
    (unfinished / "part-00000.jsonl").write_bytes((sample / "vectors" / "part-00000.jsonl").read_bytes())
    manifest = json.loads((sample / "vectors.manifest.json").read_text())
    (tmp_path / "unfinished.manifest.json").write_text(json.dumps({**manifest, "status": "running"}))
    ok = run_tool("pisa", "index", "--input", shards, "--index", tmp_path / "ix")  # as a user runs it
    assert ok.returncode == 0 and "indexed 1 documents" in ok.stderr, ok.stderr
    assert "[info]" not in ok.stderr and "Create index" not in ok.stderr  # PISA's own output: to the log
    from lsr_pyserini.engines.pisa.command import main
    before = sorted(path.name for path in tmp_path.iterdir())
    cases = [
        (("index", "--input", tmp_path / "absent", "--index", tmp_path / "x"), "no such folder"),
        (("index", "--input", fractional, "--index", tmp_path / "x"), "impacts that are not integers"),
        (("index", "--input", mixed, "--index", tmp_path / "x"), "part-00001.jsonl: not a shard of"),
        (("index", "--input", unfinished, "--index", tmp_path / "x"), "its encoding is not finished"),
        (("index", "--input", shards, "--index", tmp_path / "ix"), "already exists: pass --overwrite"),
        (("index", "--input", shards, "--index", tmp_path / "foreign"), "not written by this tool"),
        (("search", "--index", tmp_path / "absent", "--topics", tmp_path / "q.tsv", "--output", tmp_path / "r"),
         "no such PISA index folder"),
        (("search", "--index", tmp_path / "ix", "--topics", tmp_path / "q.tsv", "--output", tmp_path / "r"),
         "expected 'qid<TAB>terms repeated by impact'"),
        (("search", "--index", tmp_path / "ix", "--topics", QUERIES, "--output", tmp_path / "r"),
         "reads as query text"),
    ]
    for args, message in cases:
        with pytest.raises(InputError, match=re.escape(message)):
            main([str(arg) for arg in args])
        release_outputs()  # what the command does at exit
    after = sorted(path.name for path in tmp_path.iterdir())
    assert after == before  # nothing created
    assert not (tmp_path / "x").exists() and not (tmp_path / "r").exists()
    result = run_tool("pisa", "search", "--index", tmp_path / "ix", "--topics", tmp_path / "q.tsv",
                      "--output", tmp_path / "r")
    assert result.returncode == 2 and len(error_lines(result)) == 1, result.stderr
    (tmp_path / "ix" / "fwd.doclex").unlink()
    with pytest.raises(InputError, match="fwd.doclex: missing"):
        engine.PisaIndex(str(tmp_path / "ix"))


def test_bench_measures_engines_on_prefixes_resumes_and_refuses_bad_input(sample, tmp_path):
    """`python -m lsr_pyserini.bench` on the sample: every engine's row at each prefix, exact engines
    at recall 1 of Lucene's top k, the JSON, table and plot; a second run measures nothing again."""
    work, out = tmp_path / "work", tmp_path / "bench.json"
    args = ["--vectors", sample / "vectors", "--queries", sample / "queries.tsv", "--qrels", SAMPLE / "qrels.test.trec",
            "--text-queries", QUERIES, "--engines",
            "lucene,pisa,seismic,seismic:query_cut=1,seismic:n_postings=2:summary_energy=0.5,bmp,bm25",
            "--k", "3,10", "--sizes", "6,12", "--work", work, "--json", out, "--plot", tmp_path / "bench.png", "--quiet"]
    result = run_tool("bench", *args, check=True)
    report = json.loads(out.read_text())
    rows = {(row["engine"], row["size"]): row for row in report["rows"]}
    assert len(rows) == 14 and report["reference"] == "lucene" and report["cpu"]
    for (engine_label, size), row in rows.items():
        assert row["build_seconds"] > 0 and row["bytes"] > 0 and row["resident_bytes"] > 0, row
        assert row["k"]["10"]["p50_ms"] > 0 and row["k"]["3"]["p99_ms"] >= row["k"]["3"]["p50_ms"]
        if engine_label in ("lucene", "pisa", "seismic"):
            assert row["exact"] and row["k"]["3"]["recall"] == row["k"]["10"]["recall"] == 1.0, row
            assert row["ndcg_cut_10"] == rows[("lucene", size)]["ndcg_cut_10"]
    assert not rows[("seismic:query_cut=1", 12)]["exact"] and not rows[("bm25", 12)]["exact"]
    pruned = rows[("seismic:n_postings=2:summary_energy=0.5", 12)]
    assert not pruned["exact"] and (work / "indexes" / "seismic_n_postings-2_summary_energy-0.5-12").is_dir()
    assert json.loads((work / "indexes" / "seismic_n_postings-2_summary_energy-0.5-12" / "seismic.json").read_text()
                      )["build"]["n_postings_given"] == 2
    assert (work / "collections" / "6" / "part-00000.jsonl").is_file()  # the 6-document prefix
    assert json.loads((work / "collections" / "6.manifest.json").read_text())["settings"]["encoder"]["family"] == "splade"
    assert "growth exponent of p50 with size, pisa" in result.stdout and (tmp_path / "bench.png").stat().st_size > 0
    kept = {path: path.stat().st_mtime_ns for path in work.rglob("figures.json")}
    again = run_tool("bench", *args, check=True)
    assert {path: path.stat().st_mtime_ns for path in work.rglob("figures.json")} == kept and again.stdout
    # a stored measurement taken at other depths is measured again, not reused under the new ones
    deeper = run_tool("bench", *[("3,5" if arg == "3,10" else arg) for arg in args], check=True)
    assert all(path.stat().st_mtime_ns != mtime for path, mtime in kept.items()), deeper.stdout
    assert all(json.loads(path.read_text())["measured_with"]["ks"] == [3, 5] for path in kept)
    cases = [
        (["--sizes", "13"], "--sizes: 13 is larger than the collection (12 documents"),
        (["--engines", "elastic"], "'elastic' is not an engine bench measures"),
        (["--engines", "seismic:query_kut=3"], "seismic:query_kut=3: engine 'seismic' has no option 'query_kut'"),
        (["--engines", "bmp:alfa=0.9"], "engine 'bmp' has no option 'alfa'"),
        (["--engines", "bm25", "--text-queries", ""], "engine bm25 searches the queries' text"),
        (["--k", "ten"], "--k: expected numbers separated by commas"),
        (["--queries", QUERIES], "reads as query text"),
        (["--text-queries", sample / "queries.tsv"], "holds queries already encoded"),
        (["--vectors", sample / "lucene"], "no .jsonl/.json shards in it"),
    ]
    for extra, message in cases:
        refused = run_tool("bench", *args, *extra)
        assert refused.returncode == 2 and message in refused.stderr and len(error_lines(refused)) == 1, refused.stderr


def test_an_interrupted_build_rerun_on_other_shards_of_the_same_size_reads_them(tmp_path, monkeypatch):
    """Interrupted after its first shard, the build is run again on shards rewritten in place with
    other impacts (same file names, same byte counts): the finished part of the first input must not
    be kept (a resume keyed by names and sizes alone would search the old impacts)."""
    shards = tmp_path / "v"

    def write(impact: int) -> dict:
        vectors = {f"d{i:03d}": {"a": impact, f"t{i % 7}": 2} for i in range(40)}
        for number in range(2):
            write_shard(tmp_path / f"s{number}", dict(list(vectors.items())[20 * number: 20 * number + 20]))
            shards.mkdir(exist_ok=True)
            (tmp_path / f"s{number}" / "part-00000.jsonl").replace(shards / f"part-{number:05d}.jsonl")
        return vectors

    write(3)
    original = engine._read_part
    read = []

    def interrupted(path, *args):
        read.append(path.name)
        if len(read) == 2:
            raise KeyboardInterrupt
        return original(path, *args)

    monkeypatch.setattr(engine, "_read_part", interrupted)
    with pytest.raises(KeyboardInterrupt):
        engine.build_pisa_index(str(shards), str(tmp_path / "ix"))
    release_outputs()
    monkeypatch.setattr(engine, "_read_part", original)
    vectors = write(4)  # same names and sizes, other impacts
    with pytest.raises(InputError, match=r"ix\.partial: holds the parts of a run on other input or settings"):
        engine.build_pisa_index(str(shards), str(tmp_path / "ix"))
    release_outputs()
    engine.build_pisa_index(str(shards), str(tmp_path / "ix"), overwrite=True)
    query = {"a": 1}
    assert engine.PisaIndex(str(tmp_path / "ix")).search([("q", query)], 40)["q"] == brute_force(vectors, query, 40)


def test_bench_rerun_on_other_input_reuses_none_of_its_kept_work(sample, tmp_path):
    """bench keeps its indexes and measurements under --work (a run stopped part-way goes on): run
    again with other shards it refuses that folder in one line instead of measuring the first
    shards' index, and with the queries file edited in place it measures again."""
    from lsr_pyserini.commands.bench.command import main

    work, out, queries = tmp_path / "work", tmp_path / "bench.json", tmp_path / "queries.tsv"
    queries.write_text((sample / "queries.tsv").read_text())
    (tmp_path / "queries.tsv.lsr.json").write_text((sample / "queries.tsv.lsr.json").read_text())
    args = ["--vectors", str(sample / "vectors"), "--queries", str(queries), "--engines", "pisa", "--k", "3",
            "--work", str(work), "--json", str(out), "--quiet"]
    main(args)
    assert json.loads(out.read_text())["rows"][0]["queries"] == 7
    other = tmp_path / "other"
    other.mkdir()
    for shard in (sample / "vectors").iterdir():  # the same documents, every impact doubled
        lines = [json.loads(line) for line in shard.read_text().splitlines()]
        shard_lines = [json.dumps({**line, "vector": {t: 2 * w for t, w in line["vector"].items()}}) for line in lines]
        (other / shard.name).write_text("\n".join(shard_lines) + "\n")
    manifest = json.loads((sample / "vectors.manifest.json").read_text())
    for number, entry in manifest["shards"].items():
        shard = (other / f"part-{int(number):05d}.jsonl").read_bytes()
        entry.update(bytes=len(shard), sha256=hashlib.sha256(shard).hexdigest())
    (tmp_path / "other.manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(InputError, match=rf"--work {re.escape(str(work))}: holds the prefixes, indexes and "
                                         rf"measurements of other shards \({re.escape(str(sample / 'vectors'))}\)"):
        main([("" if arg == str(sample / "vectors") else arg) or str(other) for arg in args])
    queries.write_text("".join(queries.read_text().splitlines(keepends=True)[:4]))  # the same file, edited
    main(args)
    assert json.loads(out.read_text())["rows"][0]["queries"] == 4
    main(args + ["--max-queries", "2"])
    assert json.loads(out.read_text())["rows"][0]["queries"] == 2
    (figures,) = work.rglob("figures.json")
    kept = figures.stat().st_mtime_ns
    main(args + ["--max-queries", "2"])
    assert figures.stat().st_mtime_ns == kept  # kept: not measured again
    main(args + ["--max-queries", "2", "--remeasure"])
    assert figures.stat().st_mtime_ns != kept


def test_index_and_search_flags_reach_pisa(sample, tmp_path):
    """Every flag of `pisa index` and `pisa search` at a non-default value, its effect seen: the
    compressed file PISA wrote (encoding, block size), the conjunctive algorithm's fewer documents,
    the depth, the tag, and text topics searched only with --unrecorded-topics."""
    from lsr_pyserini.engines.pisa.command import main

    index = tmp_path / "pisa"
    main(["index", "--input", str(sample / "vectors"), "--index", str(index), "--encoding", "block_optpfor",
          "--block-size", "32", "--quiet"])
    assert sorted(path.name for path in index.glob("quantized.*")) == ["quantized.q0.bmw.32",
                                                                       "quantized.q0.bmw.32.block_optpfor"]
    topics = ["--index", str(index), "--topics", str(sample / "queries.tsv")]
    main(["search", *topics, "--output", str(tmp_path / "or.txt")])
    main(["search", *topics, "--output", str(tmp_path / "and.txt"), "--algorithm", "ranked_and", "--hits", "2",
          "--tag", "mine"])
    every, both = read_run_lines(tmp_path / "or.txt"), read_run_lines(tmp_path / "and.txt")
    assert every == read_run_lines(sample / "run.lucene.txt")  # the index of other encoding searches the same
    assert sum(map(len, both.values())) < sum(min(2, len(ranking)) for ranking in every.values())
    assert all(len(ranking) <= 2 for ranking in both.values())
    assert {line.split()[5] for line in (tmp_path / "and.txt").read_text().splitlines()} == {"mine"}
    text_topics = ["--index", str(index), "--topics", str(QUERIES)]
    with pytest.raises(InputError, match="unrecorded-topics"):
        main(["search", *text_topics, "--output", str(tmp_path / "text.txt")])
    release_outputs()
    main(["search", *text_topics, "--output", str(tmp_path / "text.txt"), "--unrecorded-topics"])
    assert (tmp_path / "text.txt").read_text()


def read_run_lines(path) -> dict[str, list[tuple[str, float]]]:
    run: dict = {}
    for line in path.read_text().splitlines():
        qid, _, docid, _, score, _ = line.split()
        run.setdefault(qid, []).append((docid, float(score)))
    return run
