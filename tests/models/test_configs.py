"""Declared settings (core/declarations.py, models/*/config.py): presets, checkpoint configs, flags and
Python arguments checked in one line before any model loads; checkpoints encode with the settings
they were trained with; a checkpoint written before that loads with one warning."""
from __future__ import annotations

import json
import shutil

import pytest
from conftest import REPO, SAMPLE, error_lines, run_tool

from lsr_pyserini.core.errors import InputError


def encode_queries(encoder, output, *flags, quiet: bool = True):
    return run_tool("encode", "queries", "--encoder", encoder, "--input", SAMPLE / "queries.test.tsv",
                    "--output", output, *(["--quiet"] if quiet else []), *flags)


@pytest.mark.parametrize("setting, message", [
    ("poolng: max", "setting 'poolng' is not read by the splade family (preset 'bad'; it reads: b, batch_size, "),
    ("doc_max_length: long", "doc_max_length: expected an integer >= 1, got 'long' (preset 'bad')"),
    ("pooling: mean", "pooling: 'mean' is not one of max, sum (preset 'bad')"),
    ("query_mode: true", "query_mode: True is not one of model, tokenizer (preset 'bad')"),
])
def test_a_bad_preset_setting_is_one_line_naming_key_source_and_allowed_before_any_model(tmp_path, setting, message):
    preset = tmp_path / "bad.yaml"
    preset.write_text(f"family: splade\nmodel: {tmp_path / 'no-such-model'}\n{setting}\n")
    result = encode_queries(preset, tmp_path / "q.tsv")
    assert result.returncode == 2 and len(error_lines(result)) == 1 and message in error_lines(result)[0]
    assert not (tmp_path / "q.tsv").exists()


def test_a_bad_checkpoint_config_and_a_bad_argument_are_refused_the_same_way(tiny_mlm, tmp_path):
    from lsr_pyserini.encoders.query import encoder_settings

    folder = tmp_path / "checkpoint"
    shutil.copytree(tiny_mlm, folder)
    (folder / "lsr_family.json").write_text(json.dumps({"family": "splade", "config": {"pooling": "avg"}}))
    with pytest.raises(InputError, match=rf"pooling: 'avg' is not one of max, sum \(checkpoint {folder}\)"):
        encoder_settings(str(folder))
    with pytest.raises(InputError, match=r"doc_top_k: expected an integer >= 1, got -2 \(argument\)"):
        encoder_settings("splade-tiny", doc_top_k=-2)
    with pytest.raises(InputError, match=r"setting 'dim' is not read by the splade family \(argument; it reads"):
        encoder_settings("splade-tiny", dim=16)


def test_a_checkpoint_of_another_family_than_asked_is_refused_before_loading(tiny_mlm, tmp_path):
    folder = tmp_path / "tildev2-checkpoint"
    shutil.copytree(tiny_mlm, folder)
    (folder / "lsr_family.json").write_text(json.dumps({"family": "tildev2", "config": {}}))
    result = encode_queries("splade-tiny", tmp_path / "q.tsv", "--model", folder)
    assert result.returncode == 2 and error_lines(result) == [
        f"error: checkpoint {folder} was trained as a 'tildev2' model, not 'splade' (asked for by preset "
        f"'splade-tiny'): use --encoder {folder} alone, or a splade checkpoint"]


def test_a_checkpoint_encodes_with_its_training_settings(tiny_mlm, tmp_path):
    """`encode --encoder DIR` writes what the preset it was trained from writes with --model DIR and
    the training-time settings; a flag still overrides; the manifest records the result."""
    negatives = tmp_path / "negatives.txt"
    qids = [line.split("\t")[0] for line in (SAMPLE / "queries.test.tsv").read_text().splitlines()]
    negatives.write_text("".join(f"{q} Q0 s{d} {d} {20 - d} bm25\n" for q in qids for d in range(1, 13)))
    model = tmp_path / "model"
    run_tool("train", "splade", "--base", tiny_mlm, "--queries", SAMPLE / "queries.test.tsv", "--qrels",
             SAMPLE / "qrels.test.trec", "--corpus", SAMPLE / "corpus.jsonl", "--negatives", negatives, "--output",
             model, "--max-steps", "0", "--batch-size", "2", "--query-max-length", "5", "--doc-max-length", "24", "--quiet", check=True)
    config = json.loads((model / "lsr_family.json").read_text())["config"]
    assert (config["query_max_length"], config["doc_max_length"], config["pooling"]) == (5, 24, "max")
    encode_queries(model, tmp_path / "own.tsv")
    encode_queries("splade-tiny", tmp_path / "preset.tsv", "--model", model, "--max-length", "5")
    encode_queries("splade-tiny", tmp_path / "default.tsv", "--model", model)
    own = (tmp_path / "own.tsv").read_text()
    assert own == (tmp_path / "preset.tsv").read_text() != (tmp_path / "default.tsv").read_text()
    for name, flags in (("own", []), ("preset", ["--encoder", "splade-tiny", "--model", model, "--max-length", "24"]),
                        ("flag", ["--max-length", "8"])):
        encoder = [] if flags[:1] == ["--encoder"] else ["--encoder", model]
        run_tool("encode", "corpus", *encoder, *flags, "--input", SAMPLE / "corpus.jsonl", "--output",
                 tmp_path / f"{name}.vectors", "--quiet", check=True)
    shard = "part-00000.jsonl"
    assert (tmp_path / "own.vectors" / shard).read_text() == (tmp_path / "preset.vectors" / shard).read_text()
    assert (tmp_path / "own.vectors" / shard).read_text() != (tmp_path / "flag.vectors" / shard).read_text()
    recorded = json.loads((tmp_path / "flag.vectors.manifest.json").read_text())["settings"]["encoder"]
    assert recorded["doc_max_length"] == 8 and recorded["query_max_length"] == 5


def test_a_checkpoint_without_its_settings_loads_with_one_warning_naming_the_defaults(tiny_mlm, tmp_path):
    folder = tmp_path / "legacy"
    shutil.copytree(tiny_mlm, folder)
    (folder / "lsr_family.json").write_text(json.dumps({"family": "splade", "pooling": "sum"}))
    result = encode_queries(folder, tmp_path / "q.tsv", quiet=False)
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert result.returncode == 0 and len(warnings) == 1, result.stderr
    assert f"{folder}: a checkpoint without its settings (lsr_family.json names only its family); assuming the " \
           f"splade defaults impact_scale=100" in warnings[0]
    assert "pooling" not in warnings[0]  # what the marker did record is taken, not assumed
    assert "doc_max_length=256, query_max_length=64" in warnings[0]


def test_the_regression_files_restate_no_setting_a_checkpoint_records():
    for path in (REPO / "eval" / "regressions" / "ci").glob("*.yaml"):
        for line in path.read_text().splitlines():
            if "encode " in line and "--encoder {work}/" in line:
                assert "--max-length" not in line and "--model" not in line, f"{path.name}: {line.strip()}"
