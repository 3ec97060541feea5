"""Encoding gives the same bytes at 1 and 2 torch threads (docs/reproducibility.md): `encode corpus`
and `encode queries --threads N` with the real SPLADE-tiny (the `splade-tiny` preset) on the 12
sample documents and the first 20 SciFact documents (most truncated at 256 tokens), and on the
sample queries and the first 50 SciFact test queries (one per forward pass, through the fast paths,
whose checks are per thread count). Shards and the query file byte for byte; manifests but for the
environment block, which records the thread count, and timings. Run in this process (`encode.main`,
which calls `torch.set_num_threads`); the thread count is put back after each run. Measured on an
AMD EPYC Zen 3 (family 25, AVX2); 3, 4 and 8 threads on its 2 cores gave the same bytes once, by
hand (docs/reproducibility.md)."""
from __future__ import annotations

import gzip
import itertools
import json

import pytest
import torch

from conftest import SAMPLE
from lsr_pyserini.commands import encode
from lsr_pyserini.core.outputs import release_outputs
from lsr_pyserini.core.writer import manifest_path


@pytest.fixture(scope="module")
def inputs(tmp_path_factory, shared_data):
    folder = tmp_path_factory.mktemp("threads-inputs")
    with gzip.open(shared_data / "scifact" / "corpus.jsonl.gz", "rt", encoding="utf-8") as lines:
        scifact = list(itertools.islice(lines, 20))
    (folder / "corpus.jsonl").write_text((SAMPLE / "corpus.jsonl").read_text() + "".join(scifact))
    test_queries = (shared_data / "scifact" / "queries.test.tsv").read_text(encoding="utf-8").splitlines(True)
    (folder / "queries.tsv").write_text((SAMPLE / "queries.test.tsv").read_text() + "".join(test_queries[:50]))
    return folder


def encoded_at(threads: int, inputs, out) -> dict[str, bytes | dict]:
    """The files of `encode corpus` and `encode queries` at `threads` torch threads."""
    before = torch.get_num_threads()
    try:
        for argv in (["corpus", "--input", inputs / "corpus.jsonl", "--output", out / "vectors", "--shard-size", "8"],
                     ["queries", "--input", inputs / "queries.tsv", "--output", out / "queries.tsv"]):
            encode.main([str(a) for a in argv] + ["--encoder", "splade-tiny", "--threads", str(threads), "--quiet"])
            assert torch.get_num_threads() == threads
            release_outputs()
    finally:
        torch.set_num_threads(before)
    files = {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
    manifest = json.loads(manifest_path(out / "vectors").read_text())
    assert manifest["environment"]["threads"] == threads
    files.pop(str(manifest_path(out / "vectors").relative_to(out)))
    for key in ("environment", "seconds_this_run", "documents_per_second_this_run", "seconds"):
        manifest.pop(key, None)
    return {"manifest": manifest, **files}


def test_encoding_is_byte_identical_at_1_and_2_threads(inputs, tmp_path):
    one, two = encoded_at(1, inputs, tmp_path / "1"), encoded_at(2, inputs, tmp_path / "2")
    assert sorted(one) == ["manifest", "queries.tsv", "queries.tsv.lsr.json", "vectors/part-00000.jsonl",
                           "vectors/part-00001.jsonl", "vectors/part-00002.jsonl", "vectors/part-00003.jsonl"]
    assert one["manifest"]["documents_written"] == 32
    assert len(one["queries.tsv"].splitlines()) == 50 + len((SAMPLE / "queries.test.tsv").read_text().splitlines())
    for name in one:
        assert one[name] == two[name], name
