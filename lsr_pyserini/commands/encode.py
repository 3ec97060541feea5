"""Encode a corpus or queries with a sparse encoder preset into files Lucene reads.

    python -m lsr_pyserini.encode corpus  --encoder NAME_OR_PRESET [--model PATH_OR_HUB_ID] --input CORPUS --output DIR
    python -m lsr_pyserini.encode queries --encoder NAME_OR_PRESET [--model PATH_OR_HUB_ID] --input QUERIES --output FILE.tsv
    python -m lsr_pyserini.encode dense   --model PATH_OR_HUB_ID --input CORPUS --output STORE [--pooling-mode cls|mean] [--normalize]

Corpus output: JsonVectorCollection shards in DIR (plus DIR.manifest.json beside it), resumable.
Query output: the TSV `pyserini.search.lucene --impact` reads, optionally JSONL with float weights.
Dense output: a dense store (faiss index + docids + manifest, see lsr_pyserini/stores/dense.py) that
`rerank --reranker dense` and `search_dense` read. Encoders with a dense side as well (PromptReps,
BGE-M3) fill a store in the same pass with `encode corpus ... --dense-store STORE` (BGE-M3's also
holds the ColBERT vectors and float sparse weights that `rerank --reranker bgem3` reads).

Every output is locked while a command writes it and checked before the model runs: an existing
output of the same kind is resumed (corpus shards, stores) or replaced only with --overwrite;
anything else is never touched. See docs/encoding.md, "Interrupted runs, locks and --overwrite".
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from .. import __version__
from ..core.cli import QUIET_HELP, progress_bar, quiet_libraries, run_main, set_threads, warn
from ..core.devices import activate, add_device_args, current
from ..core.errors import InputError
from ..core.options import positive_float, positive_int, refuse_foreign
from ..core.outputs import JSON_LINES, QUERY_FILE, claim_output
from ..core.parallel import process_shards, ray_shards
from ..core.presets import available_presets
from ..core.records import add_former_flags
from ..core.readers import checked_corpus, input_identity, read_corpus, read_queries
from ..core.declarations import UNSET, Setting
from ..core.topics import record_encoded_topics
from ..core.writer import (
    DEFAULT_SHARD_SIZE,
    SHARD_FOLDER,
    TOPIC_PATH_TRAPS,
    ShardWriter,
    WithDenseStore,
    query_line,
    write_corpus_shards,
)
from ..encoders import families_reading, families_with_dense_side
from ..encoders.query import QueryEncoder
from ..encoders.recipes import CorpusShards, DenseShards
from ..models.resolve import family_of
from ..models.resolve import resolve_settings as resolved_config
from ..models.dense.config import SCHEMA as DENSE
from ..models.registry import declared
from ..stores.dense import DENSE_STORE, DenseStoreWriter


def add_common_args(parser: argparse.ArgumentParser, side: str) -> None:
    parser.add_argument("--encoder", default="splade-tiny",
                        help=f"preset name or preset .yaml path (default: splade-tiny; available: "
                             f"{', '.join(available_presets())})")
    parser.add_argument("--input", required=True,
                        help="JSONL/JSONL.GZ file, BEIR folder or ir_datasets id" if side == "corpus"
                        else "qid<TAB>text TSV file or ir_datasets id")
    for flag, setting in setting_flags(side).items():  # each flag's type, choices and help: its declaration
        families = ", ".join(families_reading(setting.name))
        text = f"{setting.help} ({families})"
        if flag == "--batch-size" and side == "queries":
            text = ("not used for queries: each query is encoded alone, so its impacts match Pyserini's "
                    "one-query-per-call encoding (accepted for scripts written for documents)")
        setting.add_to(parser, flag, help=text, default=UNSET,
                       default_text=f"the preset's or checkpoint's, else the family's ({setting.default})")
    add_device_args(parser, "encoder")
    parser.add_argument("--threads", type=positive_int, help="torch CPU threads (default: all cores)")
    parser.add_argument("--quiet", action="store_true", help=QUIET_HELP)


def add_parallel_args(parser: argparse.ArgumentParser) -> None:
    """Where shards are encoded: here, in --workers processes, or on Ray actors (docs/distributed.md)."""
    group = parser.add_argument_group("parallel and distributed encoding (docs/distributed.md); the shards "
                                      "and manifest are byte-identical to one process's and resume the same way")
    group.add_argument("--workers", type=positive_int, metavar="N",
                       help="encode shards in N processes on this machine, each loading the model once, with "
                            "--threads torch threads each (default: 1 = this process; threads default to the "
                            "cores divided by N)")
    group.add_argument("--ray", action="store_true",
                       help="encode shards on a pool of Ray Data actors (needs pip install 'lsr-pyserini[ray]'; "
                            "default: off)")
    group.add_argument("--ray-address", metavar="ADDR",
                       help="with --ray: a running Ray cluster, e.g. ray://HOST:10001 or auto (default: start a "
                            "local Ray with this machine's cores)")
    group.add_argument("--ray-actors", type=positive_int, metavar="N",
                       help="with --ray: actors, each loading the model once (default: one per CPU of the "
                            "cluster, or per G GPUs with --ray-gpus-per-actor)")
    group.add_argument("--ray-gpus-per-actor", type=positive_float, metavar="G",
                       help="with --ray: GPUs each actor reserves, fractional allowed (default: none, CPU)")


def parallel_encoding(args, recipe, progress, documents: int):
    """The `encode_shards` the parallel flags ask for (None: encode in this process). A shard is
    encoded in one place, so more workers than the corpus has shards would idle: they are cut to
    the shard count (with the cores shared among fewer, so none idle), with a warning."""
    ray_flags = [flag for flag in ("--ray-address", "--ray-actors", "--ray-gpus-per-actor")
                 if getattr(args, flag[2:].replace("-", "_")) is not None]
    if ray_flags and not args.ray:
        raise InputError(f"{ray_flags[0]} is an option of --ray, which was not given")
    if args.ray and args.workers:
        raise InputError("--workers and --ray are exclusive: choose processes on this machine or Ray actors")
    shards = max(1, -(-documents // args.shard_size))
    if args.ray:
        if args.ray_actors and args.ray_actors > shards:
            warn(few_shards("--ray-actors", args.ray_actors, shards, args.shard_size))
        return ray_shards(recipe, progress, address=args.ray_address, actors=args.ray_actors,
                          gpus_per_actor=args.ray_gpus_per_actor or 0, threads=args.threads, quiet=args.quiet,
                          max_actors=shards)
    if args.workers and args.workers > 1:
        workers = min(args.workers, shards)
        if workers < args.workers:
            warn(few_shards("--workers", args.workers, shards, args.shard_size))
        if workers > 1:
            return process_shards(recipe, workers, args.threads, progress)
    return None


def few_shards(flag: str, asked: int, shards: int, shard_size: int) -> str:
    return (f"{flag} {asked}: the corpus makes {shards} shard(s) of --shard-size {shard_size}, each encoded in "
            f"one place; using {shards}, with the cores shared among them (a smaller --shard-size spreads the "
            f"corpus over more)")


def check_parallel_engine(args) -> None:
    """Before anything is claimed or loaded: --ray without Ray installed stops in one line."""
    if getattr(args, "ray", False):
        from ..core.parallel import import_ray

        import_ray()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m lsr_pyserini.encode", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="side", required=True)
    corpus = sub.add_parser("corpus", help="encode documents into JsonVectorCollection shards")
    add_common_args(corpus, "corpus")
    corpus.add_argument("--output", required=True, help="folder for the shards (DIR.manifest.json goes beside it)")
    corpus.add_argument("--shard-size", type=positive_int, default=DEFAULT_SHARD_SIZE,
                        help=f"documents per shard, the unit of resumption (default: {DEFAULT_SHARD_SIZE})")
    corpus.add_argument("--overwrite", action="store_true",
                        help="discard existing shards (and --dense-store) of this tool instead of resuming or "
                             "refusing (default: resume shards written with the same settings)")
    corpus.add_argument("--dense-store", metavar="STORE",
                        help="also write the encoder's dense vectors to this dense store, in the same "
                             "forward pass (encoders with a dense side: promptreps, bgem3; sparseembed writes "
                             "its term-embedding store there; default: none)")
    add_parallel_args(corpus)
    queries = sub.add_parser("queries", help="encode queries into a Lucene impact query TSV")
    add_common_args(queries, "queries")
    queries.add_argument("--output", required=True, help="query TSV (qid<TAB>terms repeated by impact)")
    queries.add_argument("--float-weights", metavar="FILE.jsonl",
                         help="also write {\"id\", \"vector\": {term: float}} per query")
    queries.add_argument("--overwrite", action="store_true",
                         help="replace an existing query file / --float-weights file (default: refuse)")
    dense = sub.add_parser("dense", help="encode documents into a dense store (faiss) for re-ranking and dense search")
    dense.add_argument("--model", required=True,
                       help="sentence-transformers or Hugging Face encoder: folder, hub id or python-package:PKG/DIR")
    dense.add_argument("--input", required=True, help="JSONL/JSONL.GZ file, BEIR folder or ir_datasets id")
    dense.add_argument("--output", required=True, help="store folder to create (STORE.partial/ while encoding)")
    for setting in DENSE.settings:  # generated from the dense family's declarations
        if setting.name != "model":
            setting.add_to(dense, default=setting.default)
    add_former_flags(dense, "dense")  # --pooling of before: --pooling-mode
    dense.add_argument("--shard-size", type=positive_int, default=DEFAULT_SHARD_SIZE,
                       help=f"documents per part, the unit of resumption (default: {DEFAULT_SHARD_SIZE})")
    dense.add_argument("--overwrite", action="store_true",
                       help="replace an existing dense store (default: refuse; an interrupted run resumes)")
    add_device_args(dense, "encoder")
    dense.add_argument("--threads", type=positive_int, help="torch CPU threads (default: all cores)")
    dense.add_argument("--quiet", action="store_true", help=QUIET_HELP)
    add_parallel_args(dense)
    return parser


def setting_flags(side: str) -> dict[str, Setting]:
    """The declared setting each `encode corpus`/`encode queries` flag overrides (--max-length and
    --top-k set the side's own)."""
    prefix = "doc" if side == "corpus" else "query"
    names = {"--model": "model", "--batch-size": "batch_size",
             "--max-length": f"{prefix}_max_length", "--top-k": f"{prefix}_top_k", "--impact-scale": "impact_scale",
             "--pooling": "pooling", "--chat-template": "chat_template", "--quantize": "quantize"}
    if side == "queries":
        names.update({"--query-mode": "query_mode", "--query-weights": "query_weights",
                      "--exact-match-weight": "exact_match_weight"})  # BM25's share: a query-side weight
    return {flag: declared(name) for flag, name in names.items() if name}


def resolve_settings(args) -> dict:
    """Preset settings with the command line's overrides applied; a flag the preset's encoder
    family does not read (or --dense-store for one without a dense side) is refused, naming it."""
    if args.side == "dense":
        return {}
    flags = {flag: setting.name for flag, setting in setting_flags(args.side).items()}
    given = {flag: getattr(args, flag[2:].replace("-", "_"), None) for flag in flags}
    owners = {flag: families_reading(key) for flag, key in flags.items()}
    owners["--dense-store"] = families_with_dense_side()
    used = [flag for flag, value in given.items() if value is not None]
    refuse_foreign(used + (["--dense-store"] if getattr(args, "dense_store", None) else []), owners,
                   family_of(args.encoder), ("encoder", "encoders"))
    settings = resolved_config(args.encoder, {flags[flag]: value for flag, value in given.items()}, "flag")
    return settings


def encode_all(args, recipe, writer, count: int) -> tuple[int, float]:
    """Encodes the `count` documents of args.input into `writer`, shard by shard, with a progress
    bar: in this process through the recipe's model, or in parallel workers (`parallel_encoding`),
    in which case the recipe drops this process's model. Returns (documents this run encoded,
    seconds)."""
    started = time.time()
    progress = progress_bar(count, args.quiet, "doc")
    encode_shards = parallel_encoding(args, recipe, progress, count)
    if encode_shards is not None:
        recipe.encoder = None  # free this process's model: the workers have theirs

    def to_records(shard):
        return recipe.records(shard, recipe.encode([d.text for d in shard], progress))

    encoded_now = write_corpus_shards(read_corpus(args.input), writer, args.shard_size, to_records, progress,
                                      count, args.output, encode_shards)
    progress.close()
    return encoded_now, time.time() - started


def encode_corpus(args, settings: dict) -> None:
    claim_output(args.output, SHARD_FOLDER, args.overwrite, resumable=True)  # before the model loads
    recipe = CorpusShards(settings, with_dense=bool(args.dense_store))
    encoder = recipe.load()  # here for its description and store; workers load their own
    check = checked_corpus(args.input)
    impact_scale = settings["impact_scale"]
    manifest_settings = {"preset": settings.get("name"), "encoder": encoder.describe(),
                         "impact_scale": impact_scale, "shard_size": args.shard_size,
                         "documents": check.count, **input_identity(args.input)}
    store = None
    if args.dense_store:
        manifest_settings["dense_store"] = str(Path(args.dense_store).resolve())
        store_settings = {k: v for k, v in manifest_settings.items() if k in ("shard_size", "documents", "input")}
        store = encoder.open_dense_store(args.dense_store, store_settings, overwrite=args.overwrite)
    sparse_writer = ShardWriter(args.output, manifest_settings, overwrite=args.overwrite)
    writer = WithDenseStore(sparse_writer, store) if store else sparse_writer
    del encoder  # the recipe keeps the model while this process encodes (encode_all)
    encoded_now, elapsed = encode_all(args, recipe, writer, check.count)
    documents, nonzeros = sparse_writer.totals()
    sparse_writer.finish({
        "toolkit_version": __version__,
        "compute": current().describe(),  # informational: the dtype is in the settings when not float32
        "documents_written": documents,
        "empty_documents": check.empty,
        "avg_nonzeros_per_document": round(nonzeros / max(documents, 1), 3),
        "shard_count": len(sparse_writer.shards),
        "seconds_this_run": round(elapsed, 2),
        "documents_per_second_this_run": round(encoded_now / elapsed, 2) if elapsed > 0 else None,
    })
    if store is not None:
        store.finish(check.count, {"toolkit_version": __version__})
    dense = f"; dense vectors in {args.dense_store}" if store else ""
    if encoded_now == 0 and documents:  # a resumed run whose every shard was already written
        print(f"{args.output} is already complete ({documents} documents in {len(sparse_writer.shards)} shard(s); "
              f"manifest {sparse_writer.manifest}{dense}); nothing to encode", file=sys.stderr)
        return
    print(f"encoded {documents} documents into {len(sparse_writer.shards)} shard(s) in {args.output} "
          f"({nonzeros / max(documents, 1):.1f} non-zero terms per document; "
          f"manifest {sparse_writer.manifest}){dense}", file=sys.stderr)


def encode_dense(args) -> None:
    claim_output(args.output, DENSE_STORE, args.overwrite)  # before the model loads
    options = DENSE.complete({setting.name: getattr(args, setting.name) for setting in DENSE.settings}, "flag")
    recipe = DenseShards({k: v for k, v in options.items() if k != "batch_size"}, options["batch_size"])
    encoder = recipe.load()  # here for its description; workers load their own
    check = checked_corpus(args.input)
    writer = DenseStoreWriter(args.output, {"encoder": encoder.describe(), "shard_size": args.shard_size,
                                            "documents": check.count, **input_identity(args.input)},
                              overwrite=args.overwrite)
    pooling_mode, normalize = encoder.pooling_mode, encoder.normalize
    del encoder  # the recipe keeps the model while this process encodes (encode_all)
    encoded_now, elapsed = encode_all(args, recipe, writer, check.count)
    manifest = writer.finish(check.count, {
        "toolkit_version": __version__, "seconds_this_run": round(elapsed, 2),
        "documents_per_second_this_run": round(encoded_now / elapsed, 2) if elapsed > 0 else None})
    size = sum(f.stat().st_size for f in Path(args.output).iterdir())
    print(f"encoded {manifest['documents']} documents into {args.output} ({manifest['dim']} dimensions, "
          f"pooling {pooling_mode}, normalised {normalize}, {size / 2**20:.2f} MiB)", file=sys.stderr)


def encode_queries(args, settings: dict) -> None:
    output = claim_output(args.output, QUERY_FILE, args.overwrite)
    float_weights = claim_output(args.float_weights, JSON_LINES, args.overwrite) if args.float_weights else None
    queries = list(read_queries(args.input))
    if not queries:  # read_queries refuses a duplicate id, naming its line
        raise InputError(f"{args.input}: no queries")
    empty = sum(not q.text.strip() for q in queries)
    if empty:
        warn(f"{empty} of {len(queries)} queries have empty text; they are encoded anyway")
    if any(trap in str(Path(args.output).resolve()) for trap in TOPIC_PATH_TRAPS):
        warn(f"{args.output}: plain `pyserini.search.lucene` reads topic paths containing "
             f"{' or '.join(TOPIC_PATH_TRAPS)} with a special reader; use `python -m lsr_pyserini.lucene search`, "
             f"which works around it, or another file name")
    query_encoder = QueryEncoder.from_settings(settings)
    progress = progress_bar(len(queries), args.quiet, "query")
    vectors = query_encoder.encode_floats([q.text for q in queries], progress)
    progress.close()
    impacts = [query_encoder.impacts(vector) for vector in vectors]
    no_terms = sum(not imp for imp in impacts)
    if no_terms:
        warn(f"{no_terms} queries have no term left after quantisation; they will retrieve nothing")
    output.write_lines(query_line(q.id, imp) for q, imp in zip(queries, impacts))
    # what the file is, for the searches that read it (core/topics.py: check_topics)
    record_encoded_topics(args.output, {"preset": settings.get("name"), "impact_scale": settings.get("impact_scale"),
                                        **query_encoder.encoder.describe()}, len(queries))
    if float_weights:
        float_weights.write_lines(json.dumps({"id": q.id, "vector": v}, ensure_ascii=False) + "\n"
                                  for q, v in zip(queries, vectors))
    terms = sum(len(imp) for imp in impacts)
    print(f"encoded {len(queries)} queries into {args.output} ({terms / len(queries):.1f} terms per query)",
          file=sys.stderr)


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    quiet_libraries(getattr(args, "quiet", False))
    settings = resolve_settings(args)
    check_parallel_engine(args)
    set_threads(args.threads)
    activate(args.device, args.dtype)  # every model below runs there (core/devices.py)
    if args.side == "dense":
        encode_dense(args)
    else:
        (encode_corpus if args.side == "corpus" else encode_queries)(args, settings)


if __name__ == "__main__":
    run_main(main)
