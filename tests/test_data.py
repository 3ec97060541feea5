"""Readers: formats accepted, and one clear file:line error per kind of bad input."""
import gzip
import json

import pytest

from lsr_pyserini.core.readers import CorpusCheck, InputError, read_corpus, read_qrels, read_queries, read_run


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_jsonl_fields_and_title_text_join(tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", [
        {"_id": "a", "title": "Title", "text": "Body text."},
        {"id": 7, "contents": "Only contents"},
        {"docid": "c", "title": "", "text": "No title"},
    ])
    docs = list(read_corpus(str(path)))
    assert [(d.id, d.text) for d in docs] == [("a", "Title Body text."), ("7", "Only contents"), ("c", "No title")]
    assert [d.line for d in docs] == [1, 2, 3]


def test_gzip_and_beir_folder(tmp_path):
    folder = tmp_path / "beir"
    folder.mkdir()
    with gzip.open(folder / "corpus.jsonl.gz", "wt") as handle:
        handle.write(json.dumps({"_id": "x", "title": "T", "text": "U"}) + "\n")
    assert [d.text for d in read_corpus(str(folder))] == ["T U"]
    assert [d.id for d in read_corpus(str(folder / "corpus.jsonl.gz"))] == ["x"]


@pytest.mark.parametrize("line, problem", [
    ('{"_id": "a", "text": "ok"}\n{"_id": "b", "text": \n', "c.jsonl:2: malformed JSON"),
    ('{"_id": "a", "text": "ok"}\n{"text": "no id"}\n', "c.jsonl:2: missing document id"),
    ('{"_id": "a", "body": "x"}\n', "c.jsonl:1: no text field"),
    ('[1, 2]\n', "c.jsonl:1: expected a JSON object"),
])
def test_corpus_errors_name_file_and_line(tmp_path, line, problem):
    path = tmp_path / "c.jsonl"
    path.write_text(line)
    with pytest.raises(InputError, match=problem):
        list(read_corpus(str(path)))


def test_duplicate_ids_and_empty_texts(tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", [{"_id": "a", "text": "x"}, {"_id": "b", "text": " "},
                                              {"_id": "a", "text": "y"}])
    with pytest.raises(InputError, match=r"c.jsonl:3: duplicate document id 'a' \(first seen at line 1\)"):
        CorpusCheck(str(path)).run()
    path = write_jsonl(tmp_path / "d.jsonl", [{"_id": "a", "text": "x"}, {"_id": "b", "text": ""}])
    check = CorpusCheck(str(path)).run()
    assert (check.count, check.empty) == (2, 1)


def test_missing_files(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        list(read_corpus(str(tmp_path / "nope.jsonl")))
    with pytest.raises(InputError, match="no such file"):
        list(read_queries(str(tmp_path / "nope.tsv")))
    with pytest.raises(InputError, match="no corpus.jsonl"):
        list(read_corpus(str(tmp_path)))


def test_queries_tsv(tmp_path):
    path = tmp_path / "q.tsv"
    path.write_text("1\tfirst query\n\n2\tsecond\twith tab\n")
    assert [(q.id, q.text) for q in read_queries(str(path))] == [("1", "first query"), ("2", "second\twith tab")]
    path.write_text("1\tok\nno tab here\n")
    with pytest.raises(InputError, match=r"q.tsv:2: expected 'qid<TAB>query text'"):
        list(read_queries(str(path)))


def test_qrels_and_run(tmp_path):
    qrels = tmp_path / "qrels"
    qrels.write_text("1 0 d1 1\n1 0 d2 0\n2 0 d3 2\n")
    assert read_qrels(str(qrels)) == {"1": {"d1": 1, "d2": 0}, "2": {"d3": 2}}
    qrels.write_text("1 0 d1\n")
    with pytest.raises(InputError, match="qrels:1: expected"):
        read_qrels(str(qrels))
    run = tmp_path / "run"
    run.write_text("1 Q0 d1 1 2.5 tag\n1 Q0 d2 2 1.0 tag\n")
    assert read_run(str(run)) == {"1": [("d1", 2.5), ("d2", 1.0)]}
    run.write_text("1 Q0 d1 1 high tag\n")
    with pytest.raises(InputError, match="run:1: score 'high'"):
        read_run(str(run))


def test_corrupt_gzip_is_one_clear_error(tmp_path):
    path = tmp_path / "c.jsonl.gz"
    data = gzip.compress(b'{"_id": "a", "text": "x"}\n' * 100)
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match="c.jsonl.gz: cannot read"):
        list(read_corpus(str(path)))
    path.write_bytes(b"not gzip at all")
    with pytest.raises(InputError, match="c.jsonl.gz: cannot read"):
        list(read_corpus(str(path)))
