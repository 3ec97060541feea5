"""The search service under load, against the in-process path it stands on, in one run.

    python benchmarks/bench_service.py --index PATH --encoder PRESET --queries Q.tsv [--engine E]
        --clients 1,4,16,64 --seconds S --json OUT [--hits 10] [--threads 2] [--soak-seconds 600]
        [--plot PNG]

1. In-process (this process): `Searcher.search` one query at a time, and `Searcher.batch_search`
   of all the queries with --threads threads, each for --seconds; the one-at-a-time rankings are
   the reference every service response is compared with. One client and `Searcher.search` are
   measured in --rounds alternating turns (--seconds / rounds each, the latencies pooled), so that
   the machine's drift over a run falls on both sides of their ratio.
2. The service (`python -m lsr_pyserini.serve`, its own process, the same index, encoder, engine
   and threads) driven over loopback by N concurrent clients for --seconds at each N: a small
   asyncio HTTP/1.1 client of its own (keep-alive connections, one per client; lighter than
   httpx or locust, so that on a 2-core machine the load generator takes little of the CPU the
   service needs). Per N: queries/s, p50 and p99 ms, errors, and responses whose ranking differs
   from the reference.
3. With --soak-seconds: --soak-clients clients for that long, the service's resident memory sampled
   every 5 s; the end against the first minute's.

It prints the figures, the ratios the service is held to, and the CPU; it asserts nothing.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lsr_pyserini.core.environment import environment  # noqa: E402
from lsr_pyserini.core.options import positive_int  # noqa: E402
from lsr_pyserini.core.readers import read_queries  # noqa: E402


def client_counts(text: str) -> list[int]:
    return [positive_int(part) for part in text.split(",")]


def percentiles(latencies: list[float]) -> dict:
    values = np.array(latencies) * 1000.0
    return {"p50_ms": float(np.percentile(values, 50)), "p99_ms": float(np.percentile(values, 99)),
            "mean_ms": float(values.mean())} if len(values) else {"p50_ms": None, "p99_ms": None, "mean_ms": None}


def in_process(args, queries) -> tuple[dict, dict]:
    """(figures, reference rankings {text: [(docid, score)]}) of the in-process paths."""
    import lsr_pyserini

    lsr_pyserini.start_jvm()
    searcher = lsr_pyserini.Searcher(args.index, encoder=args.encoder, engine=args.engine)
    texts = [text for _, text in queries]
    reference = {}
    for text in texts:  # warm, and the reference
        reference[text] = [(hit.docid, hit.score) for hit in searcher.search(text, k=args.hits)]
    latencies = search_alone(searcher, texts, args.hits, args.seconds)
    alone = {"queries_per_second": len(latencies) / sum(latencies), **percentiles(latencies)}
    qids = [str(i) for i in range(len(texts))]
    searcher.batch_search(texts, qids, k=args.hits, threads=args.threads)  # warm
    searched, started, differing = 0, time.perf_counter(), 0
    while time.perf_counter() - started < args.seconds:
        found = searcher.batch_search(texts, qids, k=args.hits, threads=args.threads)
        searched += len(texts)
        differing += sum([(h.docid, h.score) for h in found[qid]] != reference[text] for qid, text in zip(qids, texts))
    batch = {"queries_per_second": searched / (time.perf_counter() - started), "threads": args.threads,
             "differing": differing}
    return {"search": alone, "batch_search": batch}, reference, searcher


def search_alone(searcher, texts: list[str], hits: int, seconds: float, start: int = 0) -> list[float]:
    """Seconds of each `Searcher.search`, one query at a time for `seconds`."""
    latencies, started, position = [], time.perf_counter(), start
    while time.perf_counter() - started < seconds:
        text = texts[position % len(texts)]
        began = time.perf_counter()
        searcher.search(text, k=hits)
        latencies.append(time.perf_counter() - began)
        position += 1
    return latencies


def one_client_rounds(args, searcher, host, port, queries, reference) -> tuple[dict, dict]:
    """(in-process `search` figures, the 1-client row), measured in `args.rounds` alternating turns."""
    texts = [text for _, text in queries]
    alone, rows = [], []
    for turn in range(args.rounds):
        alone += search_alone(searcher, texts, args.hits, args.seconds / args.rounds, start=turn * 97)
        rows.append(asyncio.run(drive(host, port, 1, args.seconds / args.rounds, queries, args.hits, reference)))
    statuses = {}
    for part in rows:
        for status, count in part["statuses"].items():
            statuses[status] = statuses.get(status, 0) + count
    row = summary(1, [latency for part in rows for latency in part["latencies"]],
                  [latency for part in rows for latency in part["inside"]], sum(part["elapsed_s"] for part in rows),
                  sum(part["errors"] for part in rows), sum(part["differing"] for part in rows), statuses)
    del row["latencies"], row["inside"]
    row["rounds"] = args.rounds
    return {"queries_per_second": len(alone) / sum(alone), **percentiles(alone), "rounds": args.rounds}, row


class Connection:
    """One keep-alive HTTP/1.1 connection: POST JSON, read the JSON answer."""

    def __init__(self, host: str, port: int):
        self.host, self.port = host, port
        self.reader = self.writer = None

    async def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        head = (f"POST {path} HTTP/1.1\r\nHost: {self.host}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode()
        self.writer.write(head + body)
        await self.writer.drain()
        status_line = await self.reader.readline()
        length, closing = 0, False
        while True:
            line = await self.reader.readline()
            if line in (b"\r\n", b""):
                break
            name, _, value = line.decode().partition(":")
            if name.lower() == "content-length":
                length = int(value)
            elif name.lower() == "connection" and value.strip().lower() == "close":
                closing = True
        payload = await self.reader.readexactly(length)
        if closing:
            self.writer.close()
            self.writer = None
        return int(status_line.split()[1]), payload

    def close(self):
        if self.writer is not None:
            self.writer.close()


async def drive(host, port, clients: int, seconds: float, queries, hits: int, reference: dict) -> dict:
    path = "/v1/indexes/bench/search"
    bodies = [(text, json.dumps({"query": text, "hits": hits}).encode()) for _, text in queries]
    latencies, errors, differing, statuses, inside = [], 0, 0, {}, []
    deadline = time.perf_counter() + seconds

    async def client(number: int):
        nonlocal errors, differing
        connection, position = Connection(host, port), number * 7919
        try:
            while time.perf_counter() < deadline:
                text, body = bodies[position % len(bodies)]
                position += 1
                began = time.perf_counter()
                try:
                    status, payload = await connection.post(path, body)
                except (OSError, asyncio.IncompleteReadError):
                    errors += 1
                    connection.close()
                    connection = Connection(host, port)
                    continue
                latencies.append(time.perf_counter() - began)
                statuses[status] = statuses.get(status, 0) + 1
                if status != 200:
                    errors += 1
                    continue
                answer = json.loads(payload)
                inside.append(answer["took_ms"] / 1000.0)
                differing += [(c["docid"], c["score"]) for c in answer["candidates"]] != reference[text]
        finally:
            connection.close()

    started = time.perf_counter()
    await asyncio.gather(*[client(number) for number in range(clients)])
    return summary(clients, latencies, inside, time.perf_counter() - started, errors, differing, statuses)


def summary(clients: int, latencies: list[float], inside: list[float], elapsed: float, errors: int, differing: int,
            statuses: dict) -> dict:
    """A row of the table: `clients`' figures from their latencies (and the answers' `took_ms`,
    `inside`), which it keeps under "latencies" and "inside" for rows pooled from several turns."""
    return {"clients": clients, "queries_per_second": len(latencies) / elapsed, **percentiles(latencies),
            "service_p50_ms": percentiles(inside)["p50_ms"],
            "requests": len(latencies), "errors": errors, "differing": differing,
            "statuses": {str(k): v for k, v in sorted(statuses.items())},
            "elapsed_s": elapsed, "latencies": latencies, "inside": inside}


def start_service(args, folder: Path) -> tuple[subprocess.Popen, str, int]:
    ready = folder / "ready"
    command = [sys.executable, "-m", "lsr_pyserini.serve", "--index", f"bench={args.index}", "--port", "0",
               "--ready-file", str(ready), "--threads", str(args.threads), "--max-batch", str(args.max_batch),
               "--max-wait-ms", str(args.max_wait_ms), "--queue-size", str(max(256, 4 * max(args.clients))),
               "--max-hits", str(max(1000, args.hits)), "--encoder-threads", str(args.encoder_threads), "--quiet",
               "--no-mcp"]
    if args.encoder:
        command += ["--encoder", args.encoder]
    if args.engine:
        command += ["--engine", args.engine]
    log = open(folder / "service.log", "w")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "TQDM_DISABLE": "1"})
    while not ready.exists():
        if process.poll() is not None:
            sys.exit(f"the service exited ({process.returncode}): {(folder / 'service.log').read_text()[-2000:]}")
        time.sleep(0.1)
    host, port = ready.read_text().strip().rsplit(":", 1)
    return process, host.strip("[]"), int(port)


def resident_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


async def soak(host, port, process, args, queries, reference) -> dict:
    samples = []

    async def sample():
        started = time.perf_counter()
        while time.perf_counter() - started < args.soak_seconds:
            samples.append((time.perf_counter() - started, resident_mib(process.pid)))
            await asyncio.sleep(5)

    load = asyncio.create_task(drive(host, port, args.soak_clients, args.soak_seconds, queries, args.hits, reference))
    await sample()
    result = await load
    del result["latencies"], result["inside"]
    samples.append((args.soak_seconds, resident_mib(process.pid)))
    after_minute = next((rss for at, rss in samples if at >= 60), samples[0][1])
    result.update({"seconds": args.soak_seconds, "rss_after_first_minute_mib": after_minute,
                   "rss_end_mib": samples[-1][1], "rss_end_over_first_minute": samples[-1][1] / after_minute,
                   "rss_samples": samples})
    return result


def plot(report: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = report["service"]
    clients = [row["clients"] for row in rows]
    figure, left = plt.subplots(figsize=(6.4, 3.8))
    left.plot(clients, [row["queries_per_second"] for row in rows], "o-", color="tab:blue", label="service q/s")
    left.axhline(report["in_process"]["batch_search"]["queries_per_second"], color="tab:blue", ls="--",
                 label="in-process batch_search q/s")
    left.axhline(report["in_process"]["search"]["queries_per_second"], color="tab:blue", ls=":",
                 label="in-process search q/s")
    left.set_xscale("log", base=2)
    left.set_xticks(clients, [str(c) for c in clients])
    left.set_xlabel("concurrent clients")
    left.set_ylabel("queries/s", color="tab:blue")
    right = left.twinx()
    right.plot(clients, [row["p99_ms"] for row in rows], "s-", color="tab:red", label="service p99 ms")
    right.set_ylabel("p99 ms", color="tab:red")
    lines = left.get_legend_handles_labels()[0] + right.get_legend_handles_labels()[0]
    labels = left.get_legend_handles_labels()[1] + right.get_legend_handles_labels()[1]
    left.legend(lines, labels, fontsize=7, loc="upper left")
    engine = report["engine"]
    left.set_title(f"{engine} engine, {report['encoder']}, k={report['hits']}: {report['environment']['cpu']}",
                   fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index", required=True)
    parser.add_argument("--encoder", help="query encoder preset (impact engines)")
    parser.add_argument("--engine", help="lucene, bm25, sharded, seismic, dense (default: from the index)")
    parser.add_argument("--queries", required=True, help="qid<TAB>text TSV")
    parser.add_argument("--clients", type=client_counts, default=[1, 4, 16, 64])
    parser.add_argument("--seconds", type=float, default=20.0, help="per measurement (default: 20)")
    parser.add_argument("--hits", type=positive_int, default=10)
    parser.add_argument("--threads", type=positive_int, default=2, help="engine threads (service and batch_search)")
    parser.add_argument("--encoder-threads", type=positive_int, default=1, help="the service's torch threads")
    parser.add_argument("--max-batch", type=positive_int, default=32)
    parser.add_argument("--max-wait-ms", type=float, default=0.0)
    parser.add_argument("--rounds", type=positive_int, default=3,
                        help="alternating turns of 1 client and in-process search (default: 3)")
    parser.add_argument("--soak-seconds", type=float, default=0.0, help="0: no soak")
    parser.add_argument("--soak-clients", type=positive_int, default=16)
    parser.add_argument("--json", required=True)
    parser.add_argument("--plot", help="PNG of queries/s and p99 against clients")
    args = parser.parse_args()
    queries = [(query.id, query.text) for query in read_queries(args.queries)]
    figures, reference, searcher = in_process(args, queries)
    print(f"in-process search: {figures['search']['queries_per_second']:.1f} q/s, p50 "
          f"{figures['search']['p50_ms']:.2f} ms; batch_search (threads {args.threads}): "
          f"{figures['batch_search']['queries_per_second']:.1f} q/s", flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        process, host, port = start_service(args, Path(scratch))
        try:
            # warm the connections and the service (its JIT-compiled Lucene search: as long as the in-process warm-up)
            asyncio.run(drive(host, port, 4, args.seconds, queries, args.hits, reference))
            for clients in args.clients:
                if clients == 1:
                    figures["search"], row = one_client_rounds(args, searcher, host, port, queries, reference)
                    print(f"in-process search, alternating with 1 client ({args.rounds} rounds): "
                          f"p50 {figures['search']['p50_ms']:.2f} ms", flush=True)
                else:
                    row = asyncio.run(drive(host, port, clients, args.seconds, queries, args.hits, reference))
                    del row["latencies"], row["inside"]
                rows.append(row)
                print(f"{clients:3d} clients: {row['queries_per_second']:7.1f} q/s  p50 {row['p50_ms']:7.2f} ms  "
                      f"p99 {row['p99_ms']:7.2f} ms  (inside the service: p50 {row['service_p50_ms'] or 0:.2f} ms)  errors {row['errors']}  differing {row['differing']}", flush=True)
            soaked = asyncio.run(soak(host, port, process, args, queries, reference)) if args.soak_seconds else None
        finally:
            process.send_signal(signal.SIGTERM)
            exit_status = process.wait(120)
            searcher.close()
    report = {"engine": args.engine or "auto", "encoder": args.encoder, "index": args.index, "hits": args.hits,
              "service_settings": {"threads": args.threads, "encoder_threads": args.encoder_threads,
                                   "max_batch": args.max_batch, "max_wait_ms": args.max_wait_ms, "rounds": args.rounds},
              "queries": len(queries), "seconds": args.seconds, "environment": environment(args.threads),
              "in_process": figures, "service": rows, "soak": soaked, "service_exit_status": exit_status}
    by_clients = {row["clients"]: row for row in rows}
    ratios = {}
    if 1 in by_clients:
        ratios["p50_1_client_over_search"] = by_clients[1]["p50_ms"] / figures["search"]["p50_ms"]
    if 16 in by_clients:
        ratios["qps_16_over_batch_search"] = (by_clients[16]["queries_per_second"]
                                              / figures["batch_search"]["queries_per_second"])
        if 1 in by_clients:
            ratios["qps_16_over_1_client"] = by_clients[16]["queries_per_second"] / by_clients[1]["queries_per_second"]
    ratios["errors"] = sum(row["errors"] for row in rows) + (soaked["errors"] if soaked else 0)
    ratios["differing"] = sum(row["differing"] for row in rows) + (soaked["differing"] if soaked else 0)
    if soaked:
        ratios["rss_end_over_first_minute"] = soaked["rss_end_over_first_minute"]
    report["ratios"] = ratios
    print("ratios (targets: p50 1 client <= 1.3x search; 16 clients >= 0.8x batch_search and >= 2x 1 client; "
          "0 errors, 0 differing; soak RSS within 10%):")
    print(json.dumps(ratios, indent=1))
    print(f"CPU: {report['environment']['cpu']}; service exit status after SIGTERM: {exit_status}")
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    if args.plot:
        plot(report, args.plot)


if __name__ == "__main__":
    main()
