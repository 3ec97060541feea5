"""Documents read back from JsonVectorCollection shards (stores/documents.py): the fast read that
stops at the vector gives what the whole record gives, whatever the keys' order, and falls back
where it cannot tell."""
from __future__ import annotations

import gzip
import json
import threading

import pytest

from lsr_pyserini.stores.documents import ShardDocuments, document_fields

RECORDS = [
    {"id": "a", "title": "Alpha", "contents": "plain text", "vector": {"x": 1, "vector": 2}},
    # the key's text inside a string: escaped there, so never taken for the key
    {"id": "b", "contents": 'says , "vector": {"y": 1} inside', "vector": {"y": 3}},
    {"id": "c", "vector": {"z": 1}, "contents": "the vector first"},
    {"id": "d", "contents": "title after the vector", "vector": {"z": 1}, "title": "Delta"},
    {"id": "e", "contents": "an object after the vector", "vector": {"z": 1}, "meta": {"title": "not it"}},
    {"id": "f", "title": "", "contents": "empty title", "vector": {}},
    {"id": "g", "contents": "héllo \u2028 ünïcode", "vector": {"é": 4}},
]


def write(path, records, compress=False):
    text = "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records)
    if compress:
        with gzip.open(path, "wt", encoding="utf-8") as handle:
            handle.write(text)
    else:
        path.write_text(text, encoding="utf-8")


@pytest.mark.parametrize("compress", [False, True])
def test_documents_equal_the_whole_records(tmp_path, compress):
    write(tmp_path / ("part-00000.jsonl" + (".gz" if compress else "")), RECORDS[:4], compress)
    write(tmp_path / ("part-00001.jsonl" + (".gz" if compress else "")), RECORDS[4:], compress)
    shards = ShardDocuments(tmp_path)
    for record in RECORDS:
        assert shards.document(record["id"]) == document_fields(record), record["id"]
        assert shards.record(record["id"]) == record
    assert shards.document("d")["title"] == "Delta"
    assert "title" not in shards.document("e") and "title" not in shards.document("f")
    assert shards.document("missing") is None and shards.record("missing") is None
    shards.close()
    assert shards.document("b") == document_fields(RECORDS[1])  # opens its descriptor again


def test_lookups_from_many_threads(tmp_path):
    records = [{"id": str(n), "contents": f"document {n} " * (n % 7 + 1), "vector": {str(n): n}} for n in range(300)]
    write(tmp_path / "part-00000.jsonl", records[:150])
    write(tmp_path / "part-00001.jsonl", records[150:])
    shards, wrong = ShardDocuments(tmp_path), []

    def look(start):
        for n in range(start, 300, 4):
            if shards.document(str(n)) != {"contents": records[n]["contents"]}:
                wrong.append(n)

    threads = [threading.Thread(target=look, args=(start,)) for start in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []
