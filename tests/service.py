"""Helpers of the service's tests: the sample's indexes, and the service started as a user starts it
(`python -m lsr_pyserini.serve ...` in its own process, on a free loopback port)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from conftest import REPO, SAMPLE, run_tool

QUERIES = SAMPLE / "queries.test.tsv"


def build_sample_indexes(work: Path) -> dict[str, Path]:
    """SPLADE-tiny impact and BM25 Lucene indexes of the sample corpus (texts stored), under `work`."""
    corpus = SAMPLE / "corpus.jsonl"
    steps = [
        ("encode", "corpus", "--input", corpus, "--output", work / "vectors", "--quiet"),
        ("lucene", "index", "--collection", "JsonVectorCollection", "--input", work / "vectors", "--index",
         work / "splade", "--generator", "DefaultLuceneDocumentGenerator", "--impact", "--pretokenized",
         "--threads", "1", "--storeRaw"),
        ("prepare", "corpus", "--input", corpus, "--output", work / "docs", "--quiet"),
        ("lucene", "index", "--collection", "JsonCollection", "--input", work / "docs", "--index", work / "bm25",
         "--generator", "DefaultLuceneDocumentGenerator", "--threads", "1", "--storeRaw"),
    ]
    for tool, *args in steps:
        run_tool(tool, *args, check=True)
    return {"splade": work / "splade", "bm25": work / "bm25", "vectors": work / "vectors"}


def sample_queries() -> list[tuple[str, str]]:
    return [tuple(line.split("\t", 1)) for line in QUERIES.read_text().splitlines() if line.strip()]


class Service:
    """`python -m lsr_pyserini.serve ARGS --port 0` in its own process; `url` once it is ready."""

    def __init__(self, *args, folder: Path, timeout: float = 120.0, env: dict | None = None):
        self.ready_file = folder / f"ready.{os.getpid()}.{time.monotonic_ns()}"
        self.log = folder / f"{self.ready_file.name}.log"
        command = [sys.executable, "-m", "lsr_pyserini.serve", *map(str, args), "--ready-file", self.ready_file]
        if "--port" not in args:
            command += ["--port", "0"]
        with open(self.log, "w") as log:
            self.process = subprocess.Popen(list(map(str, command)), cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                                            env={**os.environ, "TQDM_DISABLE": "1", **(env or {})})
        deadline = time.monotonic() + timeout
        while not self.ready_file.exists():
            if self.process.poll() is not None:
                raise AssertionError(f"the service exited ({self.process.returncode}):\n{self.log.read_text()}")
            if time.monotonic() > deadline:
                self.process.kill()
                raise AssertionError(f"the service was not ready in {timeout} s:\n{self.log.read_text()}")
            time.sleep(0.1)
        self.address = self.ready_file.read_text().strip()
        self.url = f"http://{self.address}"

    def client(self, **kwargs) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=60.0, **kwargs)

    def stop(self, sig=signal.SIGTERM, timeout: float = 60.0) -> int:
        """Send `sig` and wait: the exit status."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise AssertionError(f"the service did not stop in {timeout} s:\n{self.log.read_text()}") from None

    def __enter__(self) -> "Service":
        return self

    def __exit__(self, *_):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
