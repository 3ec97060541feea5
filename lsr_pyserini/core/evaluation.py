"""Effectiveness and efficiency figures: trec_eval through Pyserini's Anserini jar, paired t-tests,
the metrics table, and the statistics of a Lucene impact index (size, non-zeros, expected FLOPS).
`python -m lsr_pyserini.evaluate` and `regress` print these."""
from __future__ import annotations

import math
import os
import subprocess
import tempfile
from collections import Counter
from pathlib import Path

from .errors import InputError
from .fusion import sort_ranking
from .jvm import JavaNotFound, anserini_jar, configure_environment
from .outputs import folder_bytes
from .readers import read_qrels, read_queries, read_run
from .writer import run_lines

# (key in JSON/CSV, label on screen)
METRICS = [("ndcg_cut_10", "nDCG@10"), ("mrr_10", "MRR@10"), ("recall_100", "R@100"), ("recall_1000", "R@1000")]
# The numeric figures `evaluate --index/--store --json` writes (key, what it is): what regress can check
EFFICIENCY_FIGURES = [
    ("size_bytes", "index size on disk, bytes"), ("size_mib", "index size on disk, MiB"),
    ("documents", "documents in the index"), ("unique_terms", "distinct terms in the index"),
    ("postings", "postings (sum of document frequencies)"),
    ("avg_nonzeros_per_document", "non-zero terms per document"),
    ("queries", "queries in --queries"), ("avg_nonzeros_per_query", "non-zero terms per query"),
    ("flops", "expected FLOPS per query-document pair"),
    ("store_size_bytes", "--store folder's size on disk, bytes"), ("store_documents", "documents in --store"),
    ("store_bytes_per_document", "--store bytes per document"),
    ("dim", "SparseEmbed embedding size H'"), ("avg_terms_per_document", "SparseEmbed terms per document"),
    ("terms", "SparseEmbed TERMS"), ("sparseembed_flops", "SparseEmbed FLOPS (TERMS x H')"),
]
SIGNIFICANCE_LEVEL = 0.05


def _trec_eval(args: list[str]) -> str:
    try:
        configure_environment()
    except JavaNotFound as err:
        raise InputError(str(err)) from None
    command = ["java", "-cp", anserini_jar(), "trec_eval", *args]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0 or not result.stdout.strip():
        detail = (result.stderr or result.stdout).strip().splitlines()
        raise InputError(f"trec_eval failed on {args[-1]}: {detail[-1] if detail else 'no output'}")
    return result.stdout


def _parse_per_query(output: str, rename: dict[str, str]) -> dict[str, dict[str, float]]:
    values: dict[str, dict[str, float]] = {}
    for line in output.splitlines():
        fields = line.split()
        if len(fields) == 3 and fields[0] in rename:
            values.setdefault(rename[fields[0]], {})[fields[1]] = float(fields[2])
    return values


def evaluate_run(qrels_path: str, run_path: str) -> dict[str, dict[str, float]]:
    """{metric: {qid: value, ..., "all": mean}} for one run; queries judged but not run count 0."""
    for path in (qrels_path, run_path):
        if not os.path.isfile(path):
            raise InputError(f"{path}: no such file")
    read_run(run_path)  # validates the format with a line-numbered error
    main = _trec_eval(["-c", "-q", "-m", "ndcg_cut.10", "-m", "recall.100,1000", qrels_path, run_path])
    top10 = _trec_eval(["-c", "-q", "-M", "10", "-m", "recip_rank", qrels_path, run_path])
    values = _parse_per_query(main, {"ndcg_cut_10": "ndcg_cut_10", "recall_100": "recall_100",
                                     "recall_1000": "recall_1000"})
    values.update(_parse_per_query(top10, {"recip_rank": "mrr_10"}))
    judged = [qid for qid, docs in read_qrels(qrels_path).items() if any(r > 0 for r in docs.values())]
    for metric, per_query in values.items():
        for qid in judged:
            per_query.setdefault(qid, 0.0)
    return values


# One query's metric at a cutoff, as Pyserini 2.3's MCP tool eval_hits asks trec_eval for it
# (pyserini/server/utils.py EVAL_METRICS, pyserini/server/mcp/extension.py eval_hits):
# name -> (trec_eval's arguments for the cutoff, the measure's name in its output)
CUTOFF_METRICS = {
    "ndcg": lambda cutoff: (["-m", f"ndcg_cut.{cutoff}"], f"ndcg_cut_{cutoff}"),
    "recall": lambda cutoff: (["-m", f"recall.{cutoff}"], f"recall_{cutoff}"),
    "map": lambda cutoff: (["-M", str(cutoff), "-m", "map"], "map"),
    "recip_rank": lambda cutoff: (["-M", str(cutoff), "-m", "recip_rank"], "recip_rank"),
}


def evaluate_ranking(qrels_path: str, qid: str, scores: dict[str, float], metric: str, cutoff: int = 10) -> float:
    """`metric` (a key of CUTOFF_METRICS) at `cutoff` of one query's documents `{docid: score}`,
    by trec_eval against `qrels_path`; 0.0 for no documents."""
    if metric not in CUTOFF_METRICS:
        raise InputError(f"metric {metric!r}: not one of {', '.join(CUTOFF_METRICS)}")
    if cutoff < 1:
        raise InputError(f"cutoff {cutoff}: must be 1 or more")
    if not scores:
        return 0.0
    arguments, measure = CUTOFF_METRICS[metric](cutoff)
    handle, run_path = tempfile.mkstemp(prefix="lsr-pyserini-eval-", suffix=".trec", text=True)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as run:
            run.writelines(run_lines({qid: sort_ranking(scores)}, "hits"))
        output = _trec_eval(["-c", "-q", *arguments, qrels_path, run_path])
    finally:
        os.remove(run_path)
    return _parse_per_query(output, {measure: metric}).get(metric, {}).get(qid, 0.0)


def paired_p_value(baseline: dict[str, float], other: dict[str, float]) -> float | None:
    """Two-sided paired t-test over the queries both have (None when undefined)."""
    from scipy import stats

    qids = sorted(q for q in baseline if q != "all" and q in other)
    a = [baseline[q] for q in qids]
    b = [other[q] for q in qids]
    if len(qids) < 2 or all(x == y for x, y in zip(a, b)):
        return None
    p = float(stats.ttest_rel(a, b).pvalue)
    return None if math.isnan(p) else p


def parse_run_args(runs: list[str]) -> list[tuple[str, str]]:
    named = []
    for spec in runs:
        name, sep, path = spec.partition("=")
        if not sep or os.path.exists(spec):
            name, path = Path(spec).name, spec
        named.append((name, path))
    names = [n for n, _ in named]
    if len(set(names)) != len(names):
        raise InputError(f"two runs share a name ({', '.join(names)}): name them with --run NAME=PATH")
    return named


def effectiveness(qrels: str, runs: list[tuple[str, str]]) -> list[dict]:
    """One row per run: metric means, plus `<metric>_p` against the first run."""
    rows, baseline = [], None
    for name, path in runs:
        values = evaluate_run(qrels, path)
        row = {"run": name, **{key: values.get(key, {}).get("all", 0.0) for key, _ in METRICS}}
        if baseline is None:
            baseline = values
        else:
            for key, _ in METRICS:
                row[f"{key}_p"] = paired_p_value(baseline.get(key, {}), values.get(key, {}))
        rows.append(row)
    return rows


def marked_significant(row: dict, key: str) -> bool:
    """Whether `format_table` marks the row's `key` with an asterisk (p below SIGNIFICANCE_LEVEL)."""
    p = row.get(f"{key}_p")
    return p is not None and p < SIGNIFICANCE_LEVEL


def format_table(rows: list[dict], columns: list[tuple[str, str]], footnote: str = "") -> str:
    def cell(row, key):
        value = row.get(key)
        if isinstance(value, float):
            text = f"{value:.4f}"
            return text + ("*" if marked_significant(row, key) else " ")
        return "" if value is None else str(value)

    header = [label for _, label in columns]
    body = [[cell(row, key) for key, _ in columns] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in body)) for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in body]
    return "\n".join(lines) + (f"\n{footnote}" if footnote else "")


def index_statistics(index_dir: str, queries_path: str | None = None) -> dict:
    """Size and sparsity figures of a Lucene index (and of the queries run against it)."""
    from .jvm import start_jvm

    if not os.path.isdir(index_dir):
        raise InputError(f"{index_dir}: no such index folder")
    try:
        start_jvm()
    except JavaNotFound as err:
        raise InputError(str(err)) from None
    from pyserini.index.lucene import LuceneIndexReader

    try:
        reader = LuceneIndexReader(index_dir)
    except Exception as err:
        raise InputError(f"{index_dir}: not a Lucene index ({str(err).splitlines()[0]})") from None
    stats = reader.stats()
    documents = int(stats["documents"])
    df = {term.term: term.df for term in reader.terms()}
    size = folder_bytes(index_dir)
    result = {
        "index": index_dir,
        "size_bytes": size,
        "size_mib": round(size / 2**20, 2),
        "documents": documents,
        "unique_terms": len(df),
        "postings": sum(df.values()),
        "avg_nonzeros_per_document": round(sum(df.values()) / max(documents, 1), 2),
    }
    if queries_path:
        queries, query_df = query_frequencies(queries_path)
        result["queries"] = queries
        result["avg_nonzeros_per_query"] = round(sum(query_df.values()) / queries, 2)
        result["flops"] = round(expected_overlap(query_df, queries, df, documents), 4)
    return result


def query_frequencies(queries_path: str) -> tuple[int, Counter]:
    """(number of queries, {term: queries containing it}) of a generated query TSV."""
    queries = list(read_queries(queries_path))
    if not queries:
        raise InputError(f"{queries_path}: no queries")
    query_df: Counter[str] = Counter()
    for query in queries:
        query_df.update(set(query.text.split()))
    return len(queries), query_df


def expected_overlap(query_df: Counter, queries: int, df: dict, documents: int) -> float:
    """SPLADE's FLOPS: expected terms a query and a document share, sum_t p_q(t) * p_d(t)."""
    return sum((n / queries) * (df.get(t, 0) / max(documents, 1)) for t, n in query_df.items())
