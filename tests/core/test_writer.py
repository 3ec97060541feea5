"""The shared writer: integer impacts, query lines, resumable shards that never look complete half-written."""
import json

import pytest

from lsr_pyserini.core.readers import Document, InputError
from lsr_pyserini.core.errors import Interrupted
from lsr_pyserini.core.writer import ShardWriter, manifest_path, to_impacts, query_line, write_corpus_shards


class Progress:
    def update(self, n):
        pass

    def close(self):
        pass


def test_quantize_rounds_and_drops_zeros():
    assert to_impacts({"a": 1.234, "b": 0.004, "c": 0.006, "d": 0.0}, 100) == {"a": 123, "c": 1}
    assert to_impacts({"a": 0.5}, 3) == {"a": 2}
    with pytest.raises(InputError, match="contains whitespace"):
        to_impacts({"two words": 1.0}, 100)


def test_query_line_repeats_terms_by_impact():
    assert query_line("q1", {"a": 3, "##b": 1}) == "q1\ta a a ##b\n"
    assert query_line("q2", {}) == "q2\t\n"


def documents(n):
    return [Document(f"d{i}", f"text {i}", i + 1) for i in range(n)]


def records(shard):
    return [{"id": d.id, "contents": d.text, "vector": {"t": int(d.id[1:]) + 1}} for d in shard]


def read_shards(folder):
    return sorted(p.name for p in folder.iterdir()), [
        json.loads(line) for p in sorted(folder.iterdir()) for line in p.read_text().splitlines()]


def test_interrupted_run_leaves_only_complete_shards_and_resumes(tmp_path):
    settings = {"model": "m", "shard_size": 3}
    out = tmp_path / "vectors"
    calls = []

    def interrupted(shard):
        calls.append(shard[0].id)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return records(shard)

    writer = ShardWriter(str(out), settings)
    with pytest.raises(Interrupted, match="6 of 10 documents are in complete shards for vectors"):
        write_corpus_shards(iter(documents(10)), writer, 3, interrupted, Progress(), 10, "vectors")
    assert sorted(p.name for p in out.iterdir()) == ["part-00000.jsonl", "part-00001.jsonl"]
    assert not (tmp_path / "vectors.partial").exists()
    assert json.loads(manifest_path(out).read_text())["status"] == "running"

    resumed = []
    writer = ShardWriter(str(out), settings)
    written = write_corpus_shards(iter(documents(10)), writer, 3,
                                  lambda s: resumed.append(s[0].id) or records(s), Progress(), 10, "vectors")
    writer.finish({})
    assert resumed == ["d6", "d9"] and written == 4
    assert writer.totals() == (10, 10)

    fresh = tmp_path / "fresh"
    writer = ShardWriter(str(fresh), settings)
    write_corpus_shards(iter(documents(10)), writer, 3, records, Progress(), 10, "fresh")
    assert read_shards(out) == read_shards(fresh)
    manifest = json.loads(manifest_path(out).read_text())
    assert manifest["status"] == "complete" and len(manifest["shards"]) == 4


def test_refuses_other_settings_and_foreign_folders(tmp_path):
    out = tmp_path / "vectors"
    writer = ShardWriter(str(out), {"model": "a"})
    write_corpus_shards(iter(documents(2)), writer, 5, records, Progress(), 2, "vectors")
    with pytest.raises(InputError, match="other settings \\(model differs\\)"):
        ShardWriter(str(out), {"model": "b"})
    ShardWriter(str(out), {"model": "b"}, overwrite=True)
    assert list(out.iterdir()) == []

    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match="not written by this tool"):
        ShardWriter(str(foreign), {"model": "a"})
    assert (foreign / "notes.txt").read_text() == "mine"
