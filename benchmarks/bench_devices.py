"""Benchmark: half precision against float32 on one device, with the splade-tiny preset on SciFact.

The corpus (or a subset: --docs N, made with `python -m lsr_pyserini.prepare subset`, which keeps
every document judged for the test queries and fills up at random) and the 300 test queries are
encoded twice through the commands users run (`encode corpus`, `encode queries`), once with
`--dtype float32` and once with the half dtype, on the same `--device`; each side is indexed
(`lsr_pyserini.lucene index`), searched (top 1000) and scored with trec_eval.

Printed: for every (document, term) pair with a non-zero impact on either side (the union of terms;
a term absent on one side counts as impact 0 there), the share with |impact difference| <= 1 and
the share exactly equal; the same for the queries; nDCG@10 of both runs and their difference;
encoding time of each side. The targets of issue 14 (>= 99.9% within +-1, |delta nDCG@10| <= 0.002)
are shown next to the figures; nothing is asserted.

    python benchmarks/bench_devices.py --device cuda                   # float32 vs float16 (auto)
    python benchmarks/bench_devices.py --device cuda --dtype bfloat16
    nice -n 10 python benchmarks/bench_devices.py --device cpu --dtype bfloat16 --docs 1000

A subset's nDCG@10 is higher than the full corpus's (fewer distractors): compare the two dtypes
with each other, not with the full-corpus reference (0.6436). The collection is read in place from
../shared/data/scifact (or $LSR_PYSERINI_DATA_ROOT/scifact).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA_ROOT = Path(os.environ.get("LSR_PYSERINI_DATA_ROOT", ROOT.parent / "shared" / "data"))
PRESET = "splade-tiny"
TARGET_WITHIN_ONE, TARGET_NDCG = 99.9, 0.002
sys.path.insert(0, str(ROOT))  # this checkout's lsr_pyserini, as the `-m` subprocesses (cwd ROOT) use


def tool(*args, quiet: bool = True) -> float:
    """Run `python -m lsr_pyserini.TOOL ARGS`; its wall time."""
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", *map(str, args)], cwd=ROOT, capture_output=quiet, text=True)
    if result.returncode != 0:
        sys.exit(f"{' '.join(map(str, args[:3]))} failed:\n{result.stderr[-3000:] if quiet else ''}")
    return time.perf_counter() - started


def read_shards(folder: Path) -> dict[str, dict[str, int]]:
    vectors = {}
    for shard in sorted(folder.glob("*.jsonl")):
        for line in shard.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            vectors[record["id"]] = record["vector"]
    return vectors


def read_query_tsv(path: Path) -> dict[str, dict[str, int]]:
    vectors = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        qid, _, terms = line.partition("\t")
        counts: dict[str, int] = {}
        for term in terms.split():
            counts[term] = counts.get(term, 0) + 1
        vectors[qid] = counts
    return vectors


def agreement(reference: dict[str, dict[str, int]], other: dict[str, dict[str, int]]) -> dict:
    """Over the union of (text, term) pairs: shares within +-1 and exactly equal, the largest gap."""
    pairs = within = equal = 0
    largest = 0
    for key in reference.keys() | other.keys():
        a, b = reference.get(key, {}), other.get(key, {})
        for term in a.keys() | b.keys():
            gap = abs(a.get(term, 0) - b.get(term, 0))
            pairs += 1
            within += gap <= 1
            equal += gap == 0
            largest = max(largest, gap)
    return {"pairs": pairs, "within_one_pct": round(100 * within / max(pairs, 1), 4),
            "equal_pct": round(100 * equal / max(pairs, 1), 4), "largest_gap": largest}


def ndcg10(qrels: Path, run: Path) -> float:
    from lsr_pyserini.core.evaluation import evaluate_run

    return evaluate_run(str(qrels), str(run))["ndcg_cut_10"]["all"]


def side(work: Path, corpus: Path, queries: Path, qrels: Path, device: str, dtype: str, batch_size: int,
         threads: int | None) -> dict:
    out = work / dtype
    common = ["--encoder", PRESET, "--device", device, "--dtype", dtype, "--batch-size", batch_size, "--quiet",
              *(["--threads", threads] if threads else [])]
    # each step's output already in --work (a complete one: outputs appear only when complete) is reused
    done = (out / "vectors.manifest.json").is_file() and not (out / "vectors.partial").exists()
    seconds = None if done else tool("lsr_pyserini.encode", "corpus", "--input", corpus, "--output",
                                     out / "vectors", *common)
    query_seconds = None if (out / "queries.tsv").is_file() else \
        tool("lsr_pyserini.encode", "queries", "--input", queries, "--output", out / "queries.tsv", *common)
    if not (out / "index").is_dir():
        tool("lsr_pyserini.lucene", "index", "--collection", "JsonVectorCollection", "--input", out / "vectors",
             "--index", out / "index", "--generator", "DefaultLuceneDocumentGenerator", "--impact",
             "--pretokenized", "--threads", "1")
    if not (out / "run.txt").is_file():
        tool("lsr_pyserini.lucene", "search", "--index", out / "index", "--topics", out / "queries.tsv",
             "--output", out / "run.txt", "--impact", "--hits", "1000")
    if seconds is None:  # encoded earlier: its manifest has the time
        seconds = json.loads((out / "vectors.manifest.json").read_text()).get("seconds_this_run")
    return {"dtype": dtype, "encode_corpus_s": round(seconds or 0, 1), "encode_queries_s": query_seconds and round(query_seconds, 1),
            "ndcg_10": round(ndcg10(qrels, out / "run.txt"), 4),
            "documents": read_shards(out / "vectors"), "queries": read_query_tsv(out / "queries.tsv")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="auto", help="auto|cpu|cuda|cuda:N|mps (default: auto)")
    parser.add_argument("--dtype", choices=("float16", "bfloat16"),
                        help="the half dtype compared with float32 (default: float16 on CUDA, bfloat16 elsewhere)")
    parser.add_argument("--docs", type=int, help="a subset of this many documents, judged ones included "
                                                  "(default: the whole corpus, 5,183 documents)")
    parser.add_argument("--batch-size", type=int, default=32, help="texts per forward pass (default: 32)")
    parser.add_argument("--threads", type=int, help="torch CPU threads of the encoders (default: all cores; "
                                                     "give 1 on a busy machine)")
    parser.add_argument("--work", help="folder for the encodings, indexes and runs; complete ones found there are "
                                       "reused (default: a temporary folder)")
    parser.add_argument("--json", help="also write the figures to this JSON file")
    args = parser.parse_args()
    from lsr_pyserini.core.devices import resolve_device

    device = resolve_device(args.device)
    half = args.dtype or ("float16" if device.startswith("cuda") else "bfloat16")
    collection = DATA_ROOT / "scifact"
    if not (collection / "corpus.jsonl.gz").is_file():
        sys.exit(f"{collection}: SciFact not found (set LSR_PYSERINI_DATA_ROOT)")
    queries, qrels = collection / "queries.test.tsv", collection / "qrels.test.trec"
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="bench-devices-"))
    work.mkdir(parents=True, exist_ok=True)
    corpus = collection / "corpus.jsonl.gz"
    if args.docs:
        corpus = work / f"scifact-{args.docs}.jsonl"
        if not corpus.is_file():
            tool("lsr_pyserini.prepare", "subset", "--input", collection / "corpus.jsonl.gz", "--queries", queries,
                 "--qrels", qrels, "--documents", args.docs, "--output", corpus)
    import torch

    hardware = torch.cuda.get_device_name(torch.device(device)) if device.startswith("cuda") else \
        (os.popen("lscpu | sed -n 's/^Model name: *//p'").read().strip() or "CPU")
    results = [side(work, corpus, queries, qrels, device, dtype, args.batch_size, args.threads) for dtype in ("float32", half)]
    reference, other = results
    documents = agreement(reference["documents"], other["documents"])
    query_agreement = agreement(reference["queries"], other["queries"])
    delta = round(other["ndcg_10"] - reference["ndcg_10"], 4)
    figures = {"device": device, "hardware": hardware, "torch": torch.__version__, "half_dtype": half,
               "documents": len(reference["documents"]), "queries": len(reference["queries"]),
               "corpus": "full" if not args.docs else f"subset of {args.docs}",
               "document_pairs": documents, "query_pairs": query_agreement,
               "ndcg_10": {"float32": reference["ndcg_10"], half: other["ndcg_10"], "delta": delta},
               "encode_corpus_s": {"float32": reference["encode_corpus_s"], half: other["encode_corpus_s"]},
               "encode_queries_s": {"float32": reference["encode_queries_s"], half: other["encode_queries_s"]},
               "meets_targets": documents["within_one_pct"] >= TARGET_WITHIN_ONE and abs(delta) <= TARGET_NDCG}
    print(f"splade-tiny on SciFact ({figures['corpus']}: {figures['documents']} documents, "
          f"{figures['queries']} test queries), device {device} ({hardware}), torch {torch.__version__}")
    print(f"{'':34} {'float32':>10} {half:>10}   target")
    print(f"{'nDCG@10':34} {reference['ndcg_10']:>10.4f} {other['ndcg_10']:>10.4f}   "
          f"|delta| <= {TARGET_NDCG} (delta {delta:+.4f})")
    print(f"{'encode corpus (s, wall)':34} {reference['encode_corpus_s']:>10} {other['encode_corpus_s']:>10}")
    for name, stats in (("document", documents), ("query", query_agreement)):
        print(f"{name + ' (text, term) pairs':34} {stats['pairs']:>21,}")
        print(f"{'  |impact diff| <= 1':34} {stats['within_one_pct']:>20.3f}%   >= {TARGET_WITHIN_ONE}%"
              if name == "document" else f"{'  |impact diff| <= 1':34} {stats['within_one_pct']:>20.3f}%")
        print(f"{'  exactly equal':34} {stats['equal_pct']:>20.3f}%")
        print(f"{'  largest |impact diff|':34} {stats['largest_gap']:>21}")
    print(f"targets met: {'yes' if figures['meets_targets'] else 'NO'}   (work folder: {work})")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
