"""`python -m lsr_pyserini.encode` as users call it, on a tiny random model: outputs and bad input."""
import json
import os

import pytest

from conftest import SAMPLE, error_lines, run_tool
from lsr_pyserini.core.writer import manifest_path


def encode_corpus(preset, corpus, out, *extra):
    return run_tool("encode", "corpus", "--encoder", preset, "--input", corpus, "--output", out, *extra)


def shard_records(folder):
    return [json.loads(line) for p in sorted(folder.iterdir()) for line in p.read_text().splitlines()]


def test_corpus_shards_and_manifest(tiny_preset, tmp_path):
    out = tmp_path / "vectors"
    result = encode_corpus(tiny_preset, SAMPLE / "corpus.jsonl", out, "--shard-size", "5", "--threads", "1")
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in out.iterdir()) == ["part-00000.jsonl", "part-00001.jsonl", "part-00002.jsonl"]
    records = shard_records(out)
    assert [r["id"] for r in records] == [f"s{i}" for i in range(1, 13)]
    assert records[0]["contents"].startswith("Vitamin D and bone health Vitamin D helps")
    assert all(r["contents"].startswith(r["title"] + " ") for r in records)  # kept apart for the search page
    assert records[0]["title"] == "Vitamin D and bone health"
    assert all(r["vector"] and all(isinstance(v, int) and v > 0 for v in r["vector"].values()) for r in records)
    manifest = json.loads(manifest_path(out).read_text())
    assert manifest["status"] == "complete" and manifest["documents_written"] == 12
    assert manifest["settings"]["encoder"]["doc_max_length"] == 64
    # what the vectors were encoded with, beside the settings (not among them: not compared on resume)
    environment = manifest["environment"]
    assert environment["threads"] == 1 and "environment" not in manifest["settings"]
    assert environment["torch"].startswith("2.") and environment["transformers"] and environment["pyserini"]
    assert environment["java"] and environment["python"] and environment["cpu"]
    avg = sum(len(r["vector"]) for r in records) / 12
    assert manifest["avg_nonzeros_per_document"] == pytest.approx(avg, abs=1e-3)
    again = encode_corpus(tiny_preset, SAMPLE / "corpus.jsonl", out, "--shard-size", "5")
    assert again.returncode == 0 and shard_records(out) == records
    # the resumed run found every shard written: it says so rather than "encoded 12 documents"
    assert f"{out} is already complete (12 documents in 3 shard(s); manifest " in again.stderr, again.stderr
    assert again.stderr.rstrip().endswith("; nothing to encode") and "encoded" not in again.stderr


def test_queries_tsv_repeats_terms_by_rounded_weight(tiny_preset, tmp_path):
    out, floats = tmp_path / "q.tsv", tmp_path / "q.jsonl"
    result = run_tool("encode", "queries", "--encoder", tiny_preset, "--input", SAMPLE / "queries.test.tsv",
                      "--output", out, "--float-weights", floats, "--impact-scale", "10")
    assert result.returncode == 0, result.stderr
    lines = out.read_text().splitlines()
    vectors = [json.loads(line) for line in floats.read_text().splitlines()]
    assert len(lines) == len(vectors) == len((SAMPLE / "queries.test.tsv").read_text().splitlines())
    assert all(vector["vector"] for vector in vectors)  # else empty lines would match empty vectors
    for line, vector in zip(lines, vectors):
        qid, terms = line.split("\t")
        assert qid == vector["id"]
        counts = {}
        for term in terms.split():
            counts[term] = counts.get(term, 0) + 1
        expected = {t: round(w * 10) for t, w in vector["vector"].items() if round(w * 10) > 0}
        assert counts == expected


def test_quiet_silences_the_model_loading_bar_too(monkeypatch):
    from transformers.utils import logging

    from lsr_pyserini.core.cli import quiet_libraries

    monkeypatch.delenv("HF_HUB_DISABLE_PROGRESS_BARS", raising=False)
    logging.enable_progress_bar()
    try:
        quiet_libraries(False)
        assert logging.is_progress_bar_enabled()
        quiet_libraries(True)  # transformers already imported: its bars off, and workers inherit the variable
        assert not logging.is_progress_bar_enabled()
        assert os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] == "1"
    finally:
        logging.enable_progress_bar()


@pytest.mark.parametrize("content, message", [
    ('{"_id": "a", "text": "x"}\n{"_id": "b", "text": \n', "bad.jsonl:2: malformed JSON"),
    ('{"_id": "a", "text": "x"}\n{"title": "no id"}\n', "bad.jsonl:2: missing document id"),
    ('{"_id": "a", "text": "x"}\n{"_id": "a", "text": "y"}\n', "bad.jsonl:2: duplicate document id 'a'"),
    ('', "corpus has no documents"),
])
def test_bad_corpus_one_line_and_nothing_written_is_touched(tiny_preset, tmp_path, content, message):
    out = tmp_path / "vectors"
    assert encode_corpus(tiny_preset, SAMPLE / "corpus.jsonl", out).returncode == 0
    before = shard_records(out)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(content)
    result = encode_corpus(tiny_preset, bad, out)
    assert result.returncode == 2
    assert len(error_lines(result)) == 1 and message in error_lines(result)[0], result.stderr
    assert "Traceback" not in result.stderr
    assert shard_records(out) == before


def test_other_bad_inputs(tiny_preset, tiny_encoder_only, tmp_path):
    cases = [
        (encode_corpus("no-such-preset", SAMPLE / "corpus.jsonl", tmp_path / "a"), "unknown encoder preset"),
        (encode_corpus(tiny_preset, tmp_path / "missing.jsonl", tmp_path / "b"), "missing.jsonl: no such file"),
        (encode_corpus(tiny_preset, SAMPLE / "corpus.jsonl", tmp_path / "c", "--model", tiny_encoder_only),
         "has no masked-LM head"),
        (run_tool("encode", "queries", "--encoder", tiny_preset, "--input", SAMPLE / "corpus.jsonl",
                  "--output", tmp_path / "q.tsv"), "corpus.jsonl:1: expected 'qid<TAB>query text'"),
    ]
    for result, message in cases:
        assert result.returncode == 2, result.stderr
        assert len(error_lines(result)) == 1 and message in error_lines(result)[0], result.stderr
    assert not (tmp_path / "c").exists() and not (tmp_path / "q.tsv").exists()


def test_empty_texts_are_encoded_with_one_warning(tiny_preset, tmp_path):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"_id": "a", "text": "vitamin"}\n{"_id": "b", "text": ""}\n{"_id": "c", "title": ""}\n')
    result = encode_corpus(tiny_preset, corpus, tmp_path / "out")
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert warnings == ["warning: 2 of 3 documents have empty text; they are encoded anyway"]
    assert [r["id"] for r in shard_records(tmp_path / "out")] == ["a", "b", "c"]


def test_help_on_every_command():
    for tool in ("encode", "prepare", "evaluate", "regress", "lucene", "demo"):
        result = run_tool(tool, "--help")
        assert result.returncode == 0 and f"python -m lsr_pyserini.{tool}" in result.stdout, (tool, result.stderr)


def test_ctrl_c_keeps_complete_shards_and_the_same_command_resumes(tiny_preset, tmp_path):
    import subprocess
    import sys

    from conftest import REPO, interrupt_paused, start_paused_at_part

    corpus = tmp_path / "big.jsonl"
    words = (SAMPLE / "corpus.jsonl").read_text().split()
    corpus.write_text("".join(json.dumps({"_id": f"d{i}", "text": " ".join(words[i % 50:i % 50 + 60])}) + "\n"
                              for i in range(600)))
    out = tmp_path / "vectors"
    command = [sys.executable, "-m", "lsr_pyserini.encode", "corpus", "--encoder", str(tiny_preset),
               "--input", str(corpus), "--output", str(out), "--shard-size", "100", "--quiet"]
    # Ctrl-C in the middle of the third shard (stopped there: conftest.start_paused_at_part, which
    # gives the child SIGINT as a shell does, whatever this process left in the mask it inherits)
    process = start_paused_at_part(command, 2, stderr=subprocess.PIPE, text=True)
    interrupt_paused(process)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr
    assert "interrupted: 200 of 600 documents are in complete shards" in stderr
    assert "run the same command again to resume" in stderr
    kept = sorted(p.name for p in out.iterdir())
    assert kept == ["part-00000.jsonl", "part-00001.jsonl"] and not (tmp_path / "vectors.partial").exists()
    for shard in kept:  # every shard left behind is complete
        assert len((out / shard).read_text().splitlines()) == 100
    before = {shard: (out / shard).stat().st_ino for shard in kept}

    assert subprocess.run(command, cwd=REPO, capture_output=True).returncode == 0
    assert {shard: (out / shard).stat().st_ino for shard in kept} == before  # resumed: not written again
    fresh = tmp_path / "fresh"
    fresh_command = command[:command.index("--output") + 1] + [str(fresh), "--shard-size", "100", "--quiet"]
    assert subprocess.run(fresh_command, cwd=REPO, capture_output=True).returncode == 0
    assert shard_records(out) == shard_records(fresh)
    assert json.loads(manifest_path(out).read_text())["documents_written"] == 600


def test_an_interrupted_encode_rerun_on_an_edited_corpus_keeps_none_of_the_old_shards(tiny_preset, tmp_path,
                                                                                       monkeypatch):
    """Ctrl-C after the first shard, then the corpus is edited in place (same ids, same byte count,
    other texts) and the command run again: the shard of the old texts is not resumed from (one-line
    refusal naming the input), and --overwrite encodes the new texts only."""
    from lsr_pyserini.commands.encode import main
    from lsr_pyserini.core import writer as writer_module
    from lsr_pyserini.core.errors import InputError, Interrupted
    from lsr_pyserini.core.outputs import release_outputs

    corpus, out = tmp_path / "corpus.jsonl", tmp_path / "vectors"

    def write_corpus(word: str) -> None:
        corpus.write_text("".join(json.dumps({"_id": f"d{i}", "text": f"{word} number {i}"}) + "\n" for i in range(6)))

    write_corpus("alpha")
    argv = ["corpus", "--encoder", str(tiny_preset), "--input", str(corpus), "--output", str(out),
            "--shard-size", "3", "--threads", "1", "--quiet"]
    original, written = writer_module.ShardWriter.write_shard, []

    def interrupted(self, index, records):
        if written:
            raise KeyboardInterrupt
        written.append(index)
        return original(self, index, records)

    monkeypatch.setattr(writer_module.ShardWriter, "write_shard", interrupted)
    with pytest.raises(Interrupted):
        main(argv)
    release_outputs()
    monkeypatch.setattr(writer_module.ShardWriter, "write_shard", original)
    assert [p.name for p in out.iterdir()] == ["part-00000.jsonl"]
    stat = os.stat(corpus)
    write_corpus("omega")  # the same size, other texts
    os.utime(corpus, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert os.stat(corpus).st_size == stat.st_size
    with pytest.raises(InputError, match="holds shards encoded with other settings.*input_mtime_ns"):
        main(argv)
    release_outputs()
    main(argv + ["--overwrite"])
    release_outputs()
    texts = [record["contents"] for record in shard_records(out)]
    assert texts == [f"omega number {i}" for i in range(6)]
