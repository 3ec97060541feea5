"""Metrics through trec_eval against hand-computed values; efficiency figures of a tiny impact index."""
import json
import math

import pytest

from conftest import error_lines, run_tool
from lsr_pyserini.core.evaluation import EFFICIENCY_FIGURES, effectiveness, paired_p_value


@pytest.fixture()
def qrels_and_runs(tmp_path):
    qrels = tmp_path / "qrels.trec"
    qrels.write_text("1 0 d1 1\n2 0 d3 1\n2 0 d4 1\n3 0 d9 1\n")
    run_a = tmp_path / "a.txt"
    lines = ["1 Q0 d2 1 9 a", "1 Q0 d1 2 8 a", "2 Q0 d3 1 9 a"]
    lines += [f"2 Q0 x{i} {i} {8 - i * 0.1:.2f} a" for i in range(2, 11)] + ["2 Q0 d4 11 1 a"]
    run_a.write_text("\n".join(lines) + "\n")
    run_b = tmp_path / "b.txt"
    run_b.write_text("1 Q0 d1 1 9 b\n2 Q0 d4 1 9 b\n2 Q0 d3 2 8 b\n")
    return qrels, run_a, run_b


def test_metrics_match_hand_computation(qrels_and_runs):
    qrels, run_a, run_b = qrels_and_runs
    row_a, row_b = effectiveness(str(qrels), [("a", str(run_a)), ("b", str(run_b))])
    ndcg_q1 = 1 / math.log2(3)
    ideal_q2 = 1 + 1 / math.log2(3)
    # query 3 is judged but not retrieved: it counts 0 (trec_eval -c)
    assert row_a["ndcg_cut_10"] == pytest.approx((ndcg_q1 + 1 / ideal_q2 + 0) / 3, abs=1e-4)
    assert row_a["mrr_10"] == pytest.approx((0.5 + 1 + 0) / 3, abs=1e-4)
    assert row_a["recall_100"] == pytest.approx((1 + 1 + 0) / 3, abs=1e-4)
    assert row_b["ndcg_cut_10"] == pytest.approx(2 / 3, abs=1e-4)
    assert "ndcg_cut_10_p" not in row_a and "ndcg_cut_10_p" in row_b


def test_paired_t_test():
    from scipy import stats

    a = {"1": 0.1, "2": 0.5, "3": 0.4, "4": 0.2, "all": 0.3}
    b = {"1": 0.3, "2": 0.6, "3": 0.9, "4": 0.2, "all": 0.5}
    expected = stats.ttest_rel([0.1, 0.5, 0.4, 0.2], [0.3, 0.6, 0.9, 0.2]).pvalue
    assert paired_p_value(a, b) == pytest.approx(expected)
    assert paired_p_value(a, a) is None


def test_cli_table_csv_json_and_errors(qrels_and_runs, tmp_path):
    qrels, run_a, run_b = qrels_and_runs
    result = run_tool("evaluate", "--qrels", qrels, "--run", f"first={run_a}", "--run", run_b,
                      "--csv", tmp_path / "t.csv", "--json", tmp_path / "t.json")
    assert result.returncode == 0, result.stderr
    assert "nDCG@10" in result.stdout and "first" in result.stdout and "b.txt" in result.stdout
    rows = json.loads((tmp_path / "t.json").read_text())
    assert [r["run"] for r in rows] == ["first", "b.txt"]
    assert (tmp_path / "t.csv").read_text().startswith("run,ndcg_cut_10,mrr_10,recall_100,recall_1000")
    bad = tmp_path / "bad.txt"
    bad.write_text("1 Q0 d1 1\n")
    result = run_tool("evaluate", "--qrels", qrels, "--run", bad)
    assert result.returncode == 2 and "bad.txt:1: expected 'qid Q0 docid rank score tag'" in error_lines(result)[0]


def test_index_efficiency_figures(tmp_path):
    vectors = tmp_path / "vectors"
    vectors.mkdir()
    (vectors / "part-00000.jsonl").write_text(
        '{"id": "d1", "contents": "", "vector": {"a": 10, "b": 5}}\n'
        '{"id": "d2", "contents": "", "vector": {"c": 7, "a": 1}}\n')
    run_tool("lucene", "index", "--collection", "JsonVectorCollection", "--input", vectors, "--index",
             tmp_path / "index", "--generator", "DefaultLuceneDocumentGenerator", "--impact", "--pretokenized",
             check=True)
    queries = tmp_path / "q.tsv"
    queries.write_text("q1\ta a b\nq2\tc\n")
    run_tool("evaluate", "--index", tmp_path / "index", "--queries", queries,
                      "--json", tmp_path / "e.json", check=True)
    stats = json.loads((tmp_path / "e.json").read_text())[0]
    assert (stats["documents"], stats["unique_terms"], stats["avg_nonzeros_per_document"]) == (2, 3, 2.0)
    assert stats["avg_nonzeros_per_query"] == 1.5
    # p_q(a) p_d(a) + p_q(b) p_d(b) + p_q(c) p_d(c) = .5 * 1 + .5 * .5 + .5 * .5
    assert stats["flops"] == pytest.approx(1.0)
    assert stats["size_bytes"] > 0
    # regress can check every figure written
    assert {key for key, value in stats.items() if not isinstance(value, str)} <= {key for key, _ in EFFICIENCY_FIGURES}


def test_significance_footnote_only_under_a_table_with_an_asterisk(tmp_path):
    """Ten queries: `top` finds each relevant document first, `low` at rank 3 to 7 (p < 0.05 on
    every metric but recall), `same` is `top` again (no p-value): the footnote explains an asterisk."""
    qrels = tmp_path / "qrels.trec"
    qrels.write_text("".join(f"q{i} 0 rel{i} 1\n" for i in range(10)))
    runs = {}
    for name, ranks in (("top", [1] * 10), ("low", [3 + i % 5 for i in range(10)]), ("same", [1] * 10)):
        lines = []
        for i, rank in enumerate(ranks):
            docs = [f"x{i}-{r}" for r in range(1, 11)]
            docs[rank - 1] = f"rel{i}"
            lines += [f"q{i} Q0 {doc} {r} {20 - r} {name}" for r, doc in enumerate(docs, start=1)]
        runs[name] = tmp_path / f"{name}.txt"
        runs[name].write_text("\n".join(lines) + "\n")
    footnote = "* p < 0.05 (two-sided paired t-test against top.txt)"
    marked = run_tool("evaluate", "--qrels", qrels, "--run", runs["top"], "--run", runs["low"])
    assert marked.returncode == 0, marked.stderr
    assert "*" in marked.stdout.split(footnote)[0] and marked.stdout.rstrip().endswith(footnote)
    unmarked = run_tool("evaluate", "--qrels", qrels, "--run", runs["top"], "--run", runs["same"])
    assert unmarked.returncode == 0, unmarked.stderr
    assert "*" not in unmarked.stdout and "p <" not in unmarked.stdout
