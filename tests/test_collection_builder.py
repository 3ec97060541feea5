"""benchmarks/build_collection.py's pure functions on tiny synthetic inputs: markup stripping,
passage splitting, query construction, deterministic output, the refusal of a wrong package.
Offline and fast: nothing is downloaded (apt-get is never reached)."""
from __future__ import annotations

import gzip
import hashlib
import importlib.util
import json
import sys

import pytest

from conftest import REPO

_spec = importlib.util.spec_from_file_location("build_collection", REPO / "benchmarks" / "build_collection.py")
bc = importlib.util.module_from_spec(_spec)
sys.modules["build_collection"] = bc
_spec.loader.exec_module(bc)


RST = """\
.. SPDX-License-Identifier: GPL-2.0

=============
Memory Tuning
=============

The kernel keeps a *page cache* of recently read files; see :ref:`vm-tuning <vmtune>`
and ``vm.swappiness``.

.. code-block:: c

   int secret_code = 1;

Swap behaviour
--------------

Run this::

    echo 60 > /proc/sys/vm/swappiness

.. note::
   Writing a larger value makes the kernel swap more readily.

+------+------+
| a    | b    |
+------+------+

- A list item with `a link <https://example.org>`_.
"""


def test_rst_strips_markup_keeps_prose_and_headings():
    title, sections = bc.parse_rst(RST)
    assert title == "Memory Tuning"
    assert [h for h, _ in sections] == ["Memory Tuning", "Swap behaviour"]
    text = " ".join(p for _, ps in sections for p in ps)
    assert "page cache of recently read files; see vm-tuning and vm.swappiness." in text
    assert "Writing a larger value makes the kernel swap more readily." in text
    assert "A list item with a link." in text
    assert "Run this:" in text
    for gone in ("secret_code", "echo 60", "SPDX", "+------", "code-block", "::", "`", "*page"):
        assert gone not in text, gone


def test_pod_html_markdown_man_info_vimhelp():
    title, secs = bc.parse_pod("=head1 NAME\n\nperlfoo - a test page\n\n=head1 DESCRIPTION\n\n"
                               "Use C<print> with L<the manual|perlfunc> and E<lt>FHE<gt>.\n\n"
                               "    my $code = 1;\n\n=cut\n")
    assert title == "perlfoo - a test page"
    assert secs == [("DESCRIPTION", ["Use print with the manual and <FH>."])]

    title, secs = bc.parse_html("<html><head><title>T</title><script>x=1</script></head><body>"
                                "<div class='related'>Prev Next</div><h1>Tuning ¶</h1><p>Some <b>bold</b> "
                                "&amp; text.</p><pre>code()</pre><table><tr><td>cell</td></tr></table>"
                                "<h2>2.1. Part</h2><p>More.</p></body></html>")
    assert title == "Tuning"
    assert secs == [("Tuning", ["Some bold & text."]), ("Part", ["More."])]

    title, secs = bc.parse_markdown("# Streams\n\nA `stream` is [an object](x.md).\n\n```js\nlet a;\n```\n"
                                    "| a | b |\n|---|---|\n\n## Buffers\n\n- Raw **bytes**.\n")
    assert title == "Streams"
    assert secs == [("Streams", ["A stream is an object."]), ("Buffers", ["Raw bytes."])]

    title, secs = bc.parse_man('.TH LS 1\n.SH NAME\nls \\- list files\n.SH DESCRIPTION\n.B ls\nlists '
                               '\\fIdirectory\\fR contents.\n.nf\ncode here\n.fi\n.PP\nSecond.\n')
    assert title == "ls - list files"
    assert secs == [("Description", ["ls lists directory contents.", "Second."])]

    title, secs = bc.parse_info("\x1fFile: a.info, Node: Top, Next: X\n\nIntro\n*****\n\nThe manual says "
                                "‘hello’, see *note Other::.\n\n     (code 1)\n\n* Menu:\n\n* X::\n")
    assert (title, secs) == ("Intro", [("Intro", ["The manual says hello, see Other."])])

    title, secs = bc.parse_vimhelp("*usr_01.txt*\tAbout the manuals\n\n" + "=" * 30 +
                                   "\n*01.1*\tTwo manuals\t*manuals*\n\nSee |help| for more: >\n\t:help\n<\nDone.\n")
    assert title == "About the manuals"
    assert secs == [("Two manuals", ["See help for more:", "Done."])]


GCIDE_ENTRY = """Apple \\Ap"ple\\ ([a^]p"p'l), n. [OE. appel, [ae]ppel.]
   1. The fleshy pome of a {rosaceous} tree.
      [1913 Webster]

   2. (bot.) any tree of the genus Malus
      [WordNet 1.5]
"""


def test_dictd_entries_and_gcide_stripping():
    data = b"00-database-info\nnotes\n" + GCIDE_ENTRY.encode()
    start = len(b"00-database-info\nnotes\n")
    enc = lambda n: "".join(bc._B64[(n >> s) & 63] for s in (18, 12, 6, 0)).lstrip("A") or "A"  # noqa: E731
    index = (f"00-database-info\tA\t{enc(start)}\napple\t{enc(start)}\t{enc(len(GCIDE_ENTRY))}\n"
             f"Apple\t{enc(start)}\t{enc(len(GCIDE_ENTRY))}\n")
    entries = bc.dictd_entries(index, data)
    assert [h for h, _ in entries] == ["apple"]
    paras = bc.strip_dictd(entries[0][1], "gcide")
    assert paras == ["Apple, n. [OE. appel, aeppel.] 1. The fleshy pome of a rosaceous tree."]   # WordNet sense gone


def test_passages_respect_the_word_limit_and_sentences():
    para = " ".join(f"Sentence number {i} has exactly seven words." for i in range(30))   # 210 words
    pieces = bc.split_long(para, 50)
    assert all(len(p.split()) <= 50 for p in pieces) and " ".join(pieces) == para
    assert all(p.endswith("words.") for p in pieces)                    # cut at sentence ends
    packed = bc.pack_paragraphs(["one two three"] * 5 + [para], 10)
    assert packed[:2] == ["one two three one two three one two three", "one two three one two three"]
    assert all(len(p.split()) <= 10 for p in packed)
    out = bc.document_passages("T", [("H1", ["short text"]), ("H2", ["Real words make a passage here. " * 5,
                                                                       "{}; x = f(y); [] () ==" * 5])], 30, 5)
    assert out == [("H2", ("Real words make a passage here. " * 5).strip())]
    assert not bc.mostly_prose("x = f(y); return 0; } {")


WORDNET = {
    "index.noun": "  1 header line\nmoon n 2 1 @ 2 5 00000001 00000002  \nsun n 1 1 @ 1 0 00000003  \n",
    "data.noun": "00000001 13 n 01 moon 0 000 | the natural satellite of the Earth; \"the moon was full\"\n"
                 "00000002 13 n 01 moon 0 000 | any object resembling a moon\n"
                 "00000003 13 n 01 sun 0 000 | the star that is the source of light and heat for the planets\n",
    "index.verb": "moon v 1 0 1 0 00000004  \n", "data.verb": "00000004 13 v 01 moon 0 000 | be idle; \"x\"\n",
    "index.adj": "", "data.adj": "", "index.adv": "", "data.adv": "",
}


def test_reverse_dictionary_queries_are_fair_and_deterministic():
    glosses = bc.wordnet_first_glosses(WORDNET)
    assert glosses == {"moon": "the natural satellite of the Earth",
                       "sun": "the star that is the source of light and heat for the planets"}
    gcide = {"moon": [("gcide-1", "Moon, n. The celestial orb which revolves round the earth.")],
             "sun": [("gcide-2", "Sun, n. The star that is the source of light and heat for us.")]}
    qs = bc.reverse_dictionary_queries(glosses, gcide, 10)
    assert qs == [("rd-moon", "the natural satellite of the Earth", ["gcide-1"])]   # sun: a 5-word overlap
    assert not bc.gloss_is_fair("moon", "a moonlike disc of light", [])
    assert not bc.gloss_is_fair("moon", "a disc", [])
    assert bc.reverse_dictionary_queries(dict(reversed(list(glosses.items()))), gcide, 10) == qs


def test_section_queries_skip_generic_unsure_and_code_headings():
    def info(title, heading, ids, texts, n=1):
        return {"title": title, "heading": heading, "ids": ids, "texts": texts, "n": n}
    sections = {
        ("a", "2.1. Tuning the page cache"): info("Memory", "2.1. Tuning the page cache", ["k-1", "k-2"], ["Swap less."]),
        ("a", "queue_t public static functions"): info("Q", "queue_t public static functions", ["k-8"], ["Does q."]),
        ("a", "Overview"): info("Memory", "Overview", ["k-3"], ["Text."]),
        ("b", "void f(int x)"): info("API", "void f(int x)", ["k-4"], ["Does f."]),
        ("c", "Heading said again"): info("C", "Heading said again", ["k-5"], ["The heading said again here."]),
        ("d", "Two files share this"): info("D", "Two files share this", ["k-6"], ["x"], 2),
        ("e", "Two files share this"): info("E", "Two files share this", ["k-7"], ["y"], 2),
    }
    assert bc.section_queries(sections, 5) == [("sec-0001", "Tuning the page cache", ["k-1", "k-2"])]


def test_split_and_deterministic_gzip(tmp_path):
    assert bc.is_dev("rd-moon", 0.5) == bc.is_dev("rd-moon", 0.5)
    share = sum(bc.is_dev(f"q{i}", 0.33) for i in range(3000)) / 3000
    assert 0.30 < share < 0.36
    lines = [json.dumps({"_id": f"x-{i}", "title": "t", "text": "é text"}, ensure_ascii=False) + "\n" for i in range(100)]
    a, b = tmp_path / "a" / "corpus.jsonl.gz", tmp_path / "b" / "other.gz"
    a.parent.mkdir()
    b.parent.mkdir()
    bc.gzip_bytes_deterministic(a, iter(lines))
    bc.gzip_bytes_deterministic(b, iter(lines))
    assert a.read_bytes() == b.read_bytes()                              # no name, no mtime in the header
    assert gzip.decompress(a.read_bytes()).decode() == "".join(lines)


def test_a_package_with_another_checksum_is_refused_in_one_line(tmp_path):
    deb = tmp_path / bc.deb_filename("dict-devil", "1:1.0-13.1")
    assert deb.name == "dict-devil_1%3a1.0-13.1_all.deb"
    deb.write_bytes(b"not the pinned package")
    with pytest.raises(bc.BuildError) as e:
        bc.fetch_package("dict-devil", "1:1.0-13.1", "0" * 64, tmp_path)
    assert "dict-devil" in str(e.value) and "refused" in str(e.value) and "\n" not in str(e.value)
    assert hashlib.sha256(deb.read_bytes()).hexdigest() in str(e.value)


def test_cli_refuses_bad_input_without_traceback(tmp_path, capsys):
    (tmp_path / "done").mkdir()
    assert bc.main(["--output", str(tmp_path / "done")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "exists already" in err
    assert bc.main(["--output", str(tmp_path / "new"), "--max-words", "3"]) == 2
    assert capsys.readouterr().err.startswith("error: --max-words")
    assert bc.main(["--output", str(tmp_path / "missing" / "x")]) == 2
    assert not (tmp_path / "new").exists() and not (tmp_path / "new.building").exists()


def test_a_missing_package_without_apt_get_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(bc.BuildError) as e:
        bc.fetch_package("dict-devil", "1.0-13.1", "0" * 64, tmp_path / "cache")
    assert "dict-devil" in str(e.value) and "apt-get" in str(e.value)
    assert not list((tmp_path / "cache").glob("*.deb"))
