"""Deliberate bugs that the tests must catch (a mutation check of the mended tests, docs/ci.md).

Each case edits one place of a fresh worktree of HEAD, runs the tests that cover that place and
expects them to fail; the worktree is restored after each case and removed at the end. Prints one
JSON line a case and exits 1 if any case's tests passed. Not part of the test command (about 6
minutes on 2 cores); run it after changing a test it names:

    python tests/mutants.py            # every case
    python tests/mutants.py 0 5        # some, by number (--list lists them)
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# (what the bug is, the file, the text replaced, its replacement, the tests that must fail)
CASES = [
 ("packed projection never answers", "lsr_pyserini/kernels/fastpath.py",
  "        if verdict:\n            return self.logits(positions).amax(0)", "        if False:\n            return self.logits(positions).amax(0)",
  ["tests/kernels/test_fastpath.py", "-k", "real_splade_tiny or packed_projection_gives"]),
 ("packed projection answers 1e-6 off", "lsr_pyserini/kernels/fastpath.py",
  "        if verdict:\n            return self.logits(positions).amax(0)", "        if verdict:\n            return self.logits(positions).amax(0) + 1e-6",
  ["tests/kernels/test_fastpath.py", "-k", "real_splade_tiny"]),
 ("trace never answers", "lsr_pyserini/kernels/fastpath.py",
  "        return self.trace(input_ids)\n\n\nclass _quiet", "        return self.eager(encoded)\n\n\nclass _quiet",
  ["tests/kernels/test_fastpath.py", "-k", "minilm or real_splade_tiny"]),
 ("impacts truncated instead of rounded", "lsr_pyserini/core/writer.py",
  "impact = int(round(weight * impact_scale))", "impact = int(weight * impact_scale)",
  ["tests/core/test_devices.py", "-k", "golden_shards"]),
 ("AdamW learning rate 0.1% high", "lsr_pyserini/train/loop.py",
  "torch.optim.AdamW(groups, lr=lr,", "torch.optim.AdamW(groups, lr=lr * 1.001,",
  ["tests/core/test_devices.py", "-k", "golden_weights and (splade or sparseembed)"]),
 ("SPLADE max pooling scaled by 1.00001", "lsr_pyserini/models/splade/model.py",
  "            out = torch.log1p(torch.relu(out + bias))\n", "            out = torch.log1p(torch.relu(out + bias)) * 1.00001\n",
  ["tests/models/test_parity.py", "-k", "real_splade_tiny_equals_sentence_transformers"]),
 ("packed query path without the bias", "lsr_pyserini/models/splade/model.py",
  "self._query_projection()(hidden[0][mask[0]].float()) + bias))[None]", "self._query_projection()(hidden[0][mask[0]].float())))[None]",
  ["tests/models/test_parity.py", "-k", "real_splade_tiny_queries_equal_pyserini"]),
 ("a worker encodes its shard's last text as empty", "lsr_pyserini/core/parallel.py",
  "    return _RECIPE.encode(texts)", "    return _RECIPE.encode(texts[:-1] + [''])",
  ["tests/core/test_parallel.py", "-k", "real_splade_tiny"]),
 ("int8 filter without its error bound", "lsr_pyserini/kernels/int8.py",
  "approx + self.bias + bound > threshold", "approx + self.bias > threshold",
  ["tests/kernels/test_quantize.py", "-k", "real_splade_tiny_int8"]),
 ("SPLADE weights depend on the thread count", "lsr_pyserini/models/splade/model.py",
  "            out = torch.log1p(torch.relu(out + bias))\n", "            out = torch.log1p(torch.relu(out + bias)) * (1 + 0.01 * (torch.get_num_threads() - 1))\n",
  ["tests/api/test_threads.py"]),
 ("resume does not restore the random generators", "lsr_pyserini/train/loop.py",
  "        _restore_rng(state, placement.device)", "        pass",
  ["tests/models/test_train.py", "-k", "resume_is_exact"]),
 ("README family figure off by 0.0001", "README.md",
  "| 0.6685 |", "| 0.6686 |", ["tests/test_claims.py", "-k", "every_family_figure"]),
 ("CI-tier tolerance widened past its margin", "eval/regressions/ci/splade-finetuned.yaml",
  "tolerance: 0.002, tolerance_elsewhere: 0.005, above: {splade-tiny: 0.004", "tolerance: 0.005, tolerance_elsewhere: 0.005, above: {splade-tiny: 0.004",
  ["tests/test_claims.py", "-k", "margin"]),
 ("ties ordered by reversed docid", "lsr_pyserini/core/hits.py",
  "key=lambda hit: (-hit[1], hit[0]))", "key=lambda hit: (-hit[1], hit[0][::-1]))",
  ["tests/engines/test_seismic.py"]),
 ("the skip gate lets an unlisted skip pass", "tests/conftest.py",
  "        session.exitstatus = pytest.ExitCode.TESTS_FAILED", "        pass",
  ["tests/test_skip_gate.py"]),
 ("hypothesis not derandomized", "tests/conftest.py",
  'settings.register_profile("ci", derandomize=True,', 'settings.register_profile("ci", derandomize=False,',
  ["tests/core/test_properties.py", "-k", "same_examples"]),
 ("resume writes the kept shards again", "lsr_pyserini/core/writer.py",
  "        if writer.is_complete(index):", "        if False and writer.is_complete(index):",
  ["tests/core/test_durability.py", "tests/commands/test_encode_cli.py", "-k", "sigkill_mid_encode or ctrl_c"]),
 ("MRR cut at 1 instead of 10", "lsr_pyserini/core/evaluation.py",
  '"-M", "10", "-m", "recip_rank"', '"-M", "1", "-m", "recip_rank"',
  ["tests/commands/test_pipeline.py", "-k", "demo"]),
 ("take_rows picks by indexing", "lsr_pyserini/kernels/vocabulary.py",
  "    if table.dim() == 1:\n        return torch.nn.functional.embedding(ids, table.unsqueeze(1)).squeeze(-1)\n    return torch.nn.functional.embedding(ids, table)",
  "    return table[ids]", ["tests/models/test_train.py", "-k", "take_rows"]),
 ("SAE decoder gradient left unprojected", "lsr_pyserini/models/ssr/sae.py",
  "        grad -= columns * (grad * columns).sum(0, keepdim=True)\n", "        pass\n",
  ["tests/core/test_devices.py", "-k", "ssr_fit_index_and_train"]),
 ("Lucene's fast top k stops at k+1 among ties", "lsr_pyserini/engines/lucene/engine.py",
  "if len(order) <= k or depth >= self.documents or scores[order[k - 1]] != scores[order[-1]]:", "if True:",
  ["tests/engines/test_lucene_path.py", "-k", "impact_top_k"]),
 ("adjust_ties' numpy pass counts ties from 1", "lsr_pyserini/core/hits.py",
  "ties = (np.arange(len(values)) - run_start).astype(np.float32)", "ties = (np.arange(len(values)) - run_start + 1).astype(np.float32)",
  ["tests/engines/test_lucene_path.py", "-k", "adjust_ties"]),
 ("SSR's one score drops the [CLS] term", "lsr_pyserini/models/ssr/sae.py",
  "return tokens + weight * query_cls @ doc_cls.T, tokens", "return tokens + 0 * weight * query_cls @ doc_cls.T, tokens",
  ["tests/models/test_ssr.py", "-k", "scores_equal_a_direct"]),
 ("SparseEmbed reads a checkpoint's query_top_k back as the default", "lsr_pyserini/models/sparseembed/encoder.py",
  '"queries": int(config["query_top_k"])}', '"queries": int(SCHEMA["query_top_k"].default)}',
  ["tests/models/test_checkpoint_settings.py", "-k", "sparseembed"]),
 ("an API entry point stops refusing a bad argument (k=\"10\" taken as 10)", "lsr_pyserini/core/arguments.py",
  "    if isinstance(value, (str, bytes)):\n        raise InputError(f\"{name}: expected {kind.description}",
  "    if False:\n        raise InputError(f\"{name}: expected {kind.description}",
  ["tests/api/test_refusals.py"]),
 ("an index's own record (inside its folder) ignored: a copied impact index loses its encoder", "lsr_pyserini/core/indexes.py",
  "    for path in (encoding_record_path(index), legacy_record_path(index)):", "    for path in (legacy_record_path(index),):",
  ["tests/api/test_api.py", "-k", "copied_moved_or_renamed"]),
 ("a command flag parsed but ignored: fuse --rrf-k", "lsr_pyserini/commands/fuse.py",
  "rrf_k=args.rrf_k,", "rrf_k=RRF_K,",
  ["tests/commands/test_flags_varied.py", "-k", "rrf_k"]),
 ("a header line of a topics file read as a query", "lsr_pyserini/core/topics.py",
  "    return first and qid.strip().lower() in HEADER_IDS", "    return False",
  ["tests/commands/test_what_users_met.py", "-k", "header"]),
 ("--output-format msmarco writes a TREC run", "lsr_pyserini/core/writer.py",
  'if output_format == "msmarco" else', 'if output_format == "never" else',
  ["tests/api/test_pyserini_users.py", "-k", "msmarco"]),
 ("an interrupted encode rerun on an edited corpus of the same size keeps the old shards", "lsr_pyserini/core/readers.py",
  '"input_mtime_ns": stat.st_mtime_ns}', '"input_mtime_ns": 0}',
  ["tests/commands/test_encode_cli.py", "-k", "interrupted_encode_rerun"]),
 ("exact-match side ignores Lucene's lossy document length", "lsr_pyserini/kernels/wordpiece_bm25.py",
  "k1 * (1.0 - b + b * lucene_length(length) / self.avgdl)", "k1 * (1.0 - b + b * length / self.avgdl)",
  ["tests/models/test_adapt.py", "-k", "lucene_bm25"]),
 ("exact-match query side ignores the weight", "lsr_pyserini/models/exact_match.py",
  "{EXACT_PREFIX + t: self.weight * n for t, n", "{EXACT_PREFIX + t: 2.0 * n for t, n",
  ["tests/models/test_adapt.py", "-k", "lucene_bm25 or impact_pipeline"]),
 ("adapt trains on the passage with the query left in", "lsr_pyserini/train/adapt.py",
  "texts = [self.queries[chosen[i // group_size]].rest if", "texts = [self.texts[d] if",
  ["tests/models/test_adapt.py", "-k", "cut_out"]),
 ("the JVM takes SIGTERM over (no -Xrs)", "lsr_pyserini/core/jvm.py",
  'options = ["-Xrs"]', "options = []",
  ["tests/core/test_java.py", "-k", "sigterm"]),
 ("a document read stops at the vector key even where the vector is not last", "lsr_pyserini/stores/documents.py",
  'if cut > 0 and line.rstrip().endswith(b"}}"):', "if cut > 0:",
  ["tests/core/test_shard_documents.py"]),
]


def run_case(worktree: Path, case: tuple) -> dict:
    name, path, old, new, tests = case
    subprocess.run(["git", "checkout", "-q", "--", "."], cwd=worktree, check=True)
    target = worktree / path
    text = target.read_text()
    if text.count(old) != 1:
        return {"case": name, "error": f"{path}: the text to replace is found {text.count(old)} times"}
    target.write_text(text.replace(old, new))
    env = {**os.environ, "PYTHONPATH": str(worktree), "HF_HUB_OFFLINE": "1",
           "LSR_PYSERINI_DATA_ROOT": os.environ.get("LSR_PYSERINI_DATA_ROOT", str(REPO.parent / "shared" / "data"))}
    started = time.time()
    # the worktree's package comes first: the current directory, and PYTHONPATH for the commands it starts
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:xdist", "-p", "no:cacheprovider",
                             *tests], cwd=worktree, env=env, capture_output=True, text=True)
    lines = result.stdout.splitlines()
    return {"case": name, "tests": " ".join(tests), "caught": result.returncode == 1,
            "summary": ([line for line in lines if " passed" in line or " failed" in line] or [""])[-1],
            "first_error": next((line for line in lines if line.startswith("E ")), ""),
            "seconds": round(time.time() - started)}


def main(argv: list[str]) -> int:
    if argv[:1] == ["--list"]:
        for number, case in enumerate(CASES):
            print(number, case[0])
        return 0
    chosen = [CASES[int(n)] for n in argv] if argv else CASES
    missed = 0
    with tempfile.TemporaryDirectory() as scratch:
        worktree = Path(scratch) / "mutant"
        subprocess.run(["git", "worktree", "add", "-q", "--detach", str(worktree), "HEAD"], cwd=REPO, check=True)
        try:
            for case in chosen:
                outcome = run_case(worktree, case)
                missed += not outcome.get("caught", False)
                print(json.dumps(outcome), flush=True)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(worktree)], cwd=REPO, check=False)
    print(f"{len(chosen) - missed} of {len(chosen)} deliberate bugs caught")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
