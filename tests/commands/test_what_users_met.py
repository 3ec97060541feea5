"""What a new user met: a header line in a topics file, an empty topics file, messages naming an
internal path, help texts missing engines, bench's table without units, folders git should ignore.
In-process, no JVM, no model."""
from __future__ import annotations

import logging
from pathlib import Path

import pytest
from conftest import SAMPLE

from lsr_pyserini.core.errors import InputError

QUERIES = SAMPLE / "queries.test.tsv"
SPLADE_TINY = {"family": "splade", "model": "python-package:cognition/model", "preset": "splade-tiny"}


@pytest.mark.parametrize("header", ["query-id\ttext", "qid\tquery", "id\ttext", "_id\ttext"])
def test_a_header_line_is_skipped_with_a_warning_not_read_as_a_query(header, tmp_path, caplog):
    from lsr_pyserini.core.readers import read_queries
    from lsr_pyserini.engines.lucene.command import neutral_topics_path

    topics = tmp_path / "topics.tsv"
    topics.write_text(header + "\n" + QUERIES.read_text())
    expected = list(read_queries(str(QUERIES)))
    with caplog.at_level(logging.WARNING):
        assert list(read_queries(str(topics))) == expected
    assert f"{topics}:1: {header.split(chr(9))[0]!r} reads as a header" in caplog.text
    # what `lucene search` hands Pyserini: a copy without the header
    handed = neutral_topics_path(str(topics), tmp_path)
    assert Path(handed).read_text() == QUERIES.read_text()
    # an id that only looks like a header word, after the first line, is a query
    later = tmp_path / "later.tsv"
    later.write_text(QUERIES.read_text() + "id\tan id query\n")
    assert [query.id for query in read_queries(str(later))][-1] == "id"


def test_lucene_search_on_an_empty_topics_file_names_it(tmp_path):
    from lsr_pyserini.engines.lucene.command import (
        check_tool_inputs,
        neutral_topics_path,
    )

    empty = tmp_path / "empty.tsv"
    empty.write_text("\n\n")
    with pytest.raises(InputError, match=f"^{empty}: no queries in it$"):
        check_tool_inputs("search", ["--topics", str(empty), "--output", "run.txt"])
    only_header = tmp_path / "header.tsv"
    only_header.write_text("query-id\ttext\n")
    with pytest.raises(InputError, match="no queries in it"):
        neutral_topics_path(str(only_header), tmp_path)


def test_messages_name_the_preset_typed_and_the_encoder_flag_to_give():
    from lsr_pyserini.core.topics import IMPACTS, check_topics
    from lsr_pyserini.engines.base import refuse_other_encoder

    with pytest.raises(InputError) as refused:
        check_topics(QUERIES, SPLADE_TINY, IMPACTS, index="INDEX")
    message = str(refused.value)
    assert "of splade preset splade-tiny" in message and "python-package:" not in message
    assert f"`python -m lsr_pyserini.encode queries --encoder splade-tiny --input {QUERIES} --output QUERIES.tsv`" \
        in message
    other = {"family": "splade", "model": "/checkpoints/mine", "name": "mine"}
    with pytest.raises(InputError) as refused:
        refuse_other_encoder(SPLADE_TINY, other, "INDEX")
    assert str(refused.value) == ("INDEX: its documents were encoded with preset 'splade-tiny', not model "
                                  "'/checkpoints/mine': search it with the encoder of its documents "
                                  "(--encoder splade-tiny)")
    with pytest.raises(InputError) as refused:  # the user typed splade-tiny; the index is of a checkpoint
        refuse_other_encoder({"family": "splade", "model": "/checkpoints/mine"}, SPLADE_TINY, "INDEX")
    assert "not preset 'splade-tiny'" in str(refused.value) and "python-package:" not in str(refused.value)


def test_search_and_serve_help_name_every_registered_engine_and_read_as_english():
    """The engines listed in --help come from the registry (pisa and bmp were missing in serve's)."""
    from lsr_pyserini.commands.search import build_parser as search_parser
    from lsr_pyserini.engines import available_engines
    from lsr_pyserini.serve.__main__ import build_parser as serve_parser

    for parser in (search_parser(), serve_parser()):
        text = " ".join(parser.format_help().split())
        assert all(name in text for name in available_engines()), text
    serve = " ".join(serve_parser().format_help().split())
    assert ", ".join(available_engines()) in serve
    search = " ".join(search_parser().format_help().split())
    assert "where the query encoder run" not in search and "device for the query encoder: auto" in search


def test_the_folders_the_docs_write_are_ignored_by_git():
    import subprocess

    from conftest import REPO

    paths = ["indexes/x", "runs/x", "models/x", "stores/x", "lsr_pyserini/models/x.py", "lsr_pyserini/stores/x.py"]
    ignored = subprocess.run(["git", "check-ignore", "--no-index", *paths], cwd=REPO, capture_output=True,
                             text=True, check=False).stdout.split()
    assert ignored == paths[:4]  # the package's own models/ and stores/ are not


def test_bench_table_gives_units_and_the_prefix_note_and_engines_keep_distinct_colours():
    from lsr_pyserini.commands.bench.plot import PREFIX_NOTE, engine_styles, table

    figures = {"p50_ms": 1.5, "p99_ms": 3.0, "recall": 1.0}
    rows = [{"engine": label, "name": name, "size": 1000, "build_seconds": 1.0, "bytes": 2**20,
             "resident_bytes": 2**20, "k": {"10": figures}, "ndcg_cut_10": 0.5, "mrr_10": 0.4}
            for label, name in [("Lucene impact", "lucene"), ("PISA MaxScore", "pisa"), ("PISA block-max", "pisa"),
                                ("mine", "my-engine")]]
    lines = table(rows, [10]).splitlines()
    assert lines[0].split(" | ")[5:8] == ["p50 ms@10", "p99 ms@10", "R@10"] and lines[-1] == PREFIX_NOTE
    styles = engine_styles(rows)
    assert styles["Lucene impact"][0] != styles["PISA MaxScore"][0]  # not two shades of blue: two hues
    assert styles["PISA MaxScore"][0] == styles["PISA block-max"][0]
    assert styles["PISA MaxScore"][1] != styles["PISA block-max"][1]
    assert len({colour for colour, _ in styles.values()}) == 3
