"""Build `debian-docs`, a real-text retrieval collection, from English documentation and dictionaries
that Debian 12 (bookworm) ships.

    python benchmarks/build_collection.py --output DIR [--cache DIR] [--max-words 150]
        [--min-words 20] [--queries 1500] [--sections 600] [--dev-fraction 0.33]

Sources. The .deb packages pinned in PACKAGES below (exact version and SHA-256 each) are fetched
with `apt-get download PKG=VERSION` into --cache (kept there, re-verified on every run: a package
whose version or checksum differs from its pin is refused with one line naming it) and read with
Python's own ar/tar readers (nothing is installed). Text written by people, markup stripped to plain
text, from 54 packages: reStructuredText sources (the kernel's Documentation/, Python, LLVM, Clang,
CMake, Sphinx and scientific-Python projects), POD (Perl), HTML (PostgreSQL, Django, SQLite,
Erlang, Qt, Boost, Rust's books, Git, Apache, Exim, Postfix and more), Markdown (Node.js), man
pages, GNU Info manuals, Vim's help, and four dictionaries in dictd format: GCIDE (the
Collaborative International Dictionary of English, 1913 Webster and later additions; its senses
taken from WordNet are dropped), FOLDOC, the Jargon File and the Devil's Dictionary. docs/collection.md
lists them with their versions and describes the collection.

Passages. Each document is cut at its section headings; within a section, paragraphs are packed
greedily into passages of at most --max-words words (a longer paragraph is cut at sentence ends),
never across a section. Code blocks, literal blocks, tables and directive bodies that hold code are
dropped; passages under --min-words words (dictionary entries: 8), mostly non-words, or exact
repeats of an earlier passage are dropped. A passage's title is its document's title (a
dictionary's: the headword); ids are `<source>-<n>`, numbered in the order read.

Queries (judged, built from structure the text already has):
  - rd-<word> (reverse dictionary): the WordNet 3.0 gloss (package wordnet-base, which is not in
    the collection) of a word's first sense is the query; the GCIDE passages whose headword is that
    word are relevant (1). Words are taken in the order of SHA-256("rd:" + word); a word is kept
    when it has 1 to 4 GCIDE passages, the gloss has at least 4 words, has no word starting with
    the word or sharing its first 5 letters, and shares no 5-word sequence with a relevant passage.
  - sec-<n> (section heading): the heading of a documentation section (its numbering dropped; at
    least 3 words of 3+ letters, no code signature, used once in the whole collection, not the
    document's title, not a generic one such as "Examples") is the query; that section's passages, from
    which headings are always stripped, are relevant (1). Sections are taken in the order of
    SHA-256("sec:" + heading); a heading that occurs verbatim in its own passages is skipped.
  Each query goes to dev or test by SHA-256 of its id (--dev-fraction to dev).

Output (the layout of ../shared/data): DIR/corpus.jsonl.gz (gzip with mtime 0 and no file name,
so the bytes repeat), queries.{dev,test}.tsv, qrels.{dev,test}.trec, manifest.json (package
versions, .deb SHA-256, settings, counts and the SHA-256 of every other output file). Everything is
written into DIR.building/ first and renamed to DIR when complete; an interrupted run resumes from
the downloads and from the packages already parsed (DIR.building/parts/). DIR that exists already
is refused.
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import html
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from html.parser import HTMLParser
from pathlib import Path

BUILDER_VERSION = 1
NAME = "debian-docs"

# name, version, SHA-256 of the .deb, parser, id prefix, member filter (regular expression on the
# path inside the package, searched), exclusion (regular expression, searched) or None.
PACKAGES = [
    ("dict-gcide", "0.48.5+nmu2", "7b0af5cfde3cbdef5e9d6e78f92ec335ced7c2790f37a40f49bebc6f7347ac0f",
     "dictd", "gcide", r"/gcide\.(index|dict\.dz)$", None),
    ("dict-foldoc", "20230119-1", "745cbedb55c2da609cc88ee0284e9d11a67a11ae3709daf7bad0e895ac3294c3",
     "dictd", "foldoc", r"/foldoc\.(index|dict\.dz)$", None),
    ("dict-jargon", "4.4.7-3.1", "405f8168d7994ed2cb71407bb95493daec2e9aa66fc0461dafa74a9d6728a8c1",
     "dictd", "jargon", r"/jargon\.(index|dict\.dz)$", None),
    ("dict-devil", "1.0-13.1", "6a535684def2a1f70cd42da16d12d43f0e9dc3e54e4a329178eebab3170e3154",
     "dictd", "devil", r"/devil\.(index|dict\.dz)$", None),
    ("linux-doc-6.1", "6.1.192-3", "f18dfe28dcab7bdbf9185be16b9521f5841277a6a96c374a6683a648d5d5fa4f",
     "rst", "kdoc", r"/linux-doc-6\.1/Documentation/.*\.rst\.gz$", r"/Documentation/translations/"),
    ("python3.11-doc", "3.11.2-6+deb12u9", "5b3594189d6ef9a6963ce0347fd307a1cc67620ad697e144db366070e2e146be",
     "rst", "pydoc", r"/html/_sources/.*\.rst\.txt$", None),
    ("llvm-14-doc", "1:14.0.6-12", "d83d576ccf39dd9c698f983677f5569284cb4d55f084dd135859a73d31910b1a",
     "rst", "llvm", r"/html/_sources/.*\.rst\.txt$", None),
    ("cmake-doc", "3.25.1-1", "6e805a758ffed87cc7ea234cf0a7a1bb8ae78b93d8b5783e7fb989a6320f8133",
     "rst", "cmake", r"/html/_sources/.*\.rst\.txt$", None),
    ("sphinx-doc", "5.3.0-4", "1da3d08bb3a0bc82a4b8b8109410e223054bf5fb13904557ec8ea869046f65b4",
     "rst", "sphinx", r"/_sources/.*\.rst\.txt$", None),
    ("python-pandas-doc", "1.5.3+dfsg-2", "4998405ff6b12432f46594963e95554ade1104705795428396345fca58d853f8",
     "rst", "pandas", r"/_sources/.*\.rst\.txt$", r"/_sources/reference/api/"),
    ("python-astropy-doc", "5.2.1-2+deb12u1", "d7cfa77ec5239a4ebcdf27c7cdc3d9e604228e99257f91d4260abbb970469b91",
     "rst", "astropy", r"/_sources/.*\.rst\.txt$", r"/_sources/api/"),
    ("python-sympy-doc", "1.11.1-1", "2a1d50bd49738f0280308fc8d86d5fa5739dbc6391e1c754f4549bc3635e6a31",
     "rst", "sympy", r"/_sources/.*\.rst\.txt$", None),
    ("python-statsmodels-doc", "0.13.5+dfsg-7", "4167a3e13347343b9f0a6677fc804ecad80dd735d17bc051829610f6f1bc2afb",
     "rst", "statsm", r"/_sources/.*\.rst\.txt$", r"/_sources/generated/"),
    ("perl-doc", "5.36.0-7+deb12u4", "f4269cff4576d6f02a6756df842988e58451c7e945b08517dd235531b24e48f8",
     "pod", "perldoc", r"/usr/share/perl/5\.36\.0/pod/.*\.pod$", None),
    ("postgresql-doc-15", "15.20-0+deb12u1", "4c44bf2c599f208b3f46454a6cf7a72e25ec46ff74d37b59dd31ad76b00eebb7",
     "html", "pgdoc", r"/postgresql-doc-15/html/.*\.html$", None),
    ("python-django-doc", "3:3.2.25-0+deb12u7", "87307f067916df72e17180d35b7cde5c7ea6080336cda518efd7f6e66988a7ca",
     "html", "django", r"/html/.*\.html$", r"/html/(_modules/|search\.html|genindex\.html|py-modindex\.html)"),
    ("sqlite3-doc", "3.40.1-2+deb12u2", "466e30d7066e2641fa13e56bc662a2ad521b8cc9c17dde9c9dac3d4f105e32f2",
     "html", "sqlite", r"/doc/sqlite3/.*\.html$", None),
    ("erlang-doc", "1:25.2.3+dfsg-1+deb12u4", "7d172cecfdd9c2930b27c776ad226ffcc84670375cf830c79ee41c6944e8a1c8",
     "html", "erlang", r"/erlang-doc/.*\.html$", r"(/search\.html|index\.html|/release_notes\.html|/notes\.html)$"),
    ("debian-reference-en", "2.100", "9f31d3a17df505de09689ca255512ea58c1fc47c59bb1b0c7bf1c23362e9743f",
     "html", "debref", r"/debian-reference/.*\.en\.html$", None),
    ("nodejs-doc", "18.20.4+dfsg-1~deb12u3", "d2fbd4f3aecccea9d901a03842ef8380379e0d33010a48af5e797ed68ae874ce",
     "md", "nodejs", r"/doc/nodejs/api/.*\.md\.gz$", r"/all\.md\.gz$"),
    ("rust-doc", "1.63.0+dfsg1-2", "96ef96fe6df87d939ca713bd7df3d15c2b778ccb892eca025c4ee504146f697b",
     "html", "rust", r"/rust-doc/html/(book|reference|nomicon|rust-by-example|cargo|rustc|rustdoc|edition-guide|"
     r"embedded-book|unstable-book|style-guide)/.*\.html$", r"/(print|toc|404)\.html$"),
    ("gimp-help-en", "2.10.34-2", "a2deec76763aaf2fcdd197bac0736cdcb0770ba993d48d233329e1c92b0bfe36",
     "html", "gimp", r"/help/en/.*\.html$", None),
    ("apache2-doc", "2.4.71-1~deb12u1", "a7b3d1131c1c63dbf9999b28e75f9a133d30f70492b419936bd51759ac77a01f",
     "html", "apache", r"/apache2-doc/manual/en/.*\.html$", None),
    ("debian-handbook", "11.20220922", "3d5dbeac1f1afc9c094eab9d0f701f6ecff99c4927d5a4794cf6c85678134faa",
     "html", "dhb", r"/html/en-US/.*\.html$", None),
    ("octave-doc", "7.3.0-2", "b27897cc7e3d688daa5cb8f8d1ea47077f3fbd205ce32e22522200ff0c1eadd5",
     "html", "octave", r"/doc/octave/.*\.html$", None),
    ("python-sqlalchemy-doc", "1.4.46+ds1-1", "8805c3167ef75278ac6fd58ed9856321c2b2e3a7e441edba84b2eb955216d0fd",
     "html", "sqla", r"/html/.*\.html$", r"/html/(_modules/|search\.html|genindex\.html)"),
    ("python-scipy-doc", "1.10.1-2", "a237fdcef1675622f1a5d8a291c64feba140615130ee625554f94772d4ea3ad7",
     "html", "scipy", r"/html/.*\.html$", r"/html/(_modules/|search\.html|genindex\.html|py-modindex\.html)"),
    ("git-doc", "1:2.39.5-0+deb12u3", "3c89668a11053a6bafade3de1f611f4613db31e082af63f43d8c5b69ad8795ec",
     "html", "git", r"/doc/git-doc/.*\.html$", None),
    ("manpages", "6.03-2", "efa1ba4cd19ad7baeae959c9209a7eb74be2ebb858bcabb412597bfc9f588c91",
     "man", "man", r"/usr/share/man/man\d/.*\.gz$", None),
    ("manpages-dev", "6.03-2", "96f55cb5e26231d5567c89b692bced63825a14a2d5bd18fdf16ea2ed44eb9838",
     "man", "mandev", r"/usr/share/man/man\d/.*\.gz$", None),
    ("vim-runtime", "2:9.0.1378-2+deb12u2", "6a3dd2317a593742cb247f3494d986b3127887dbe1449253b8efa6112289854e",
     "vimhelp", "vim", r"/vim90/doc/.*\.txt$", None),
    ("clang-14-doc", "1:14.0.6-12", "9d4160c5cdb3e240fc676eacba163481002363f9532f854bc09e3eb566eb5c0f",
     "rst", "clang", r"/html/_sources/.*\.rst\.txt$", None),
    ("python-sklearn-doc", "1.2.1+dfsg-1", "4e244556326064e87e7563e3e544c2288d44b5719db2d7b3a85c9a84ae93488d",
     "rst", "sklearn", r"/_sources/.*\.rst\.txt$", r"/_sources/(modules/generated|auto_examples)/"),
    ("python-dask-doc", "2022.12.1+dfsg-2", "81fc4cc36bfc939ed9ff28c2423d921909cfbef1af69055131b79ab69a33b615",
     "rst", "dask", r"/_sources/.*\.rst\.txt$", r"/_sources/generated/"),
    ("python-xarray-doc", "2023.01.0-1.1", "1d42be6f1c4b0c4c5b37a4b8884d7483d9995d8b6362ee490579806d8b4ba9e2",
     "rst", "xarray", r"/_sources/.*\.rst\.txt$", r"/_sources/generated/"),
    ("python-flask-doc", "2.2.2-3", "0659f6a04b15fe3f907150cadc0399fe987c790e722e001b73f7e49fa5ecca15",
     "rst", "flask", r"/_sources/.*\.rst\.txt$", None),
    ("exim4-doc-html", "4.96-1", "f0613395fd73c3c278b619c8162c5a183e7874cbfdebe3614b4b3339d5d8a120",
     "html", "exim", r"/exim4-doc-html/.*\.html$", None),
    ("postfix-doc", "3.7.11-0+deb12u1", "6b07bcc68991703acf747dc2500355bdd02aef0a048419b939752c39faf47d8d",
     "html", "postfix", r"/doc/postfix/html/.*\.html$", None),
    ("zsh-doc", "5.9-4", "79bd75df4bf03d1021e993fd773f82b8a4c8d76649e420cd32eca940cf418ff4",
     "html", "zsh", r"/zsh-common/html/.*\.html$", None),
    ("gnuplot-doc", "5.4.4+dfsg1-2", "73fe1816a296594cf6a1d38528f8d740fd650f57a2cb62e029f7920fcd5b31f0",
     "html", "gnuplot", r"/gnuplot/htmldocs/.*\.html$", None),
    ("bind9-doc", "1:9.18.49-1~deb12u3", "7a3282f365576e58378b242ea7e8bd65ce227e94dd4abe8acbb5874873e7265e",
     "html", "bind9", r"/bind9-doc/arm/.*\.html$", None),
    ("libssl-doc", "3.0.22-1~deb12u2", "b79995160eeb7673b3933bf270105e075814a13b3d499db8c65bb41735748b41",
     "man", "openssl", r"/usr/share/man/man\d/.*\.gz$", None),
    ("tcl8.6-doc", "8.6.13+dfsg-2", "e6468aa726a0d77f3e61ae4714bcf7c4c4ddd02828388977f765ffdda4935876",
     "man", "tcl", r"/usr/share/man/man\w+/.*\.gz$", None),
    ("tk8.6-doc", "8.6.13-2", "8e93967b9d5d36e2eff002f27261b93417a7c439a8207932fe8335f0ac84b407",
     "man", "tk", r"/usr/share/man/man\w+/.*\.gz$", None),
    ("lilypond-doc", "2.24.1-2", "946f18c3407a5bd2b9d4e374d2774c547ab7c5e6f9f3e2dd66c4cc77c74f1380",
     "info", "lily", r"/usr/share/info/.*\.info(-\d+)?\.gz$", r"/lilypond-(internals|snippets)"),
    ("guile-3.0-doc", "3.0.8-2", "2169d284c252874221e1fe81094de499672606e06210d613d94125c5242c2b95",
     "info", "guile", r"/usr/share/info/.*\.info(-\d+)?\.gz$", None),
    ("r-doc-info", "4.2.2.20221110-2", "622344f981dc6f4fe755311cffe6d6ce7e001bfd7205dbb79e7f8646db91d5d2",
     "info", "rdoc", r"/usr/share/info/.*\.info(-\d+)?\.gz$", None),
    ("maxima-doc", "5.46.0-11", "01a726b693a7e465a62040ac5ade4762194d7553524231d77cd1fcd4a69a75b9",
     "info", "maxima", r"/usr/share/info/.*\.info(-\d+)?\.gz$", None),
    ("gnutls-doc", "3.7.9-2+deb12u7", "b8d23e45a2fdded941d823d7bd328f3349a9b01cc9519ab6c9ed63a352751803",
     "info", "gnutls", r"/usr/share/info/.*\.info(-\d+)?\.gz$", None),
    ("automake", "1:1.16.5-1.3", "f9a5758d87b5389bf2dbb00cc9c48e0cf59bb0ac842c5ce25d41e4bfa3f2f962",
     "info", "automake", r"/usr/share/info/.*\.info(-\d+)?\.gz$", None),
    ("libtool-doc", "2.4.7-7~deb12u1", "1caf319d637d91150f4f74123433e028eaeabd5ac09002a4ffb8761c54f0b43d",
     "info", "libtool", r"/usr/share/info/.*\.info(-\d+)?\.gz$", None),
    ("sbcl-doc", "2:2.2.9-1", "cbb347501ecb4cd6011b805495684b41375a9efbee45f3c33a388da910fa01a0",
     "info", "sbcl", r"/usr/share/info/.*\.info(-\d+)?\.gz$", None),
    ("qtbase5-doc-html", "5.15.8+dfsg-11+deb12u3", "e052497a7db970f002807e3543043c11e46135641b8284b0a419086ba64f5f47",
     "html", "qt", r"/usr/share/qt5/doc/.*\.html$", r"-(members|obsolete)\.html$"),
    ("libboost1.81-doc", "1.81.0-5+deb12u1", "da1e2182ea8955cf6155924066dd611588f855aebf961d0ea0e7ac0092216ebb",
     "html", "boost", r"/libboost1\.81-doc/.*\.html?$", None),
    # Queries only, never in the collection.
    ("wordnet-base", "1:3.0-37", "61060d960f9ada8fa120872312eccd3ecebfbab8c4579e4f5a74e1cf67620752",
     "wordnet", None, r"/usr/share/wordnet/(index|data)\.(noun|verb|adj|adv)$", None),
]


class BuildError(Exception):
    """A one-line error for the user (printed as `error: ...`, exit 2)."""


def words(text: str) -> list[str]:
    return text.split()


def norm_space(text: str) -> str:
    return " ".join(text.split())


# ---------------------------------------------------------------------------------------------
# Markup stripping. Every parser returns a document: (title, [(heading, [paragraph, ...]), ...]),
# headings never part of a paragraph.

_RST_ADORN = re.compile(r"^([=\-~^\"'`#*+.:_<>!$%&,/;?@\\|])\1{2,}\s*$")
_RST_KEEP_BODY = {
    "note", "warning", "tip", "important", "attention", "caution", "danger", "error", "hint",
    "seealso", "admonition", "topic", "sidebar", "deprecated", "versionadded", "versionchanged",
    "function", "method", "class", "attribute", "data", "exception", "module", "describe", "option",
    "envvar", "c:function", "c:macro", "c:type", "c:member", "c:struct", "c:var", "py:function",
    "py:method", "py:class", "py:attribute", "py:data", "py:exception", "decorator", "classmethod",
    "staticmethod", "coroutinefunction", "coroutinemethod", "abstractmethod", "opcode", "cmdoption",
    "program", "glossary", "rst:directive", "confval", "setting", "templatetag", "templatefilter",
    "django-admin", "fieldlookup", "only", "container", "centered", "rubric", "epigraph", "highlights",
    "pull-quote", "compound", "cpp:function", "cpp:class", "cpp:type", "js:function", "signal",
}


def rst_inline(text: str) -> str:
    """reST inline markup to plain text: roles, literals, links, emphasis, substitutions, footnotes."""
    text = re.sub(r":[\w.+:-]+:`([^`<]*?)\s*<[^`>]*>`", r"\1", text)     # :role:`text <target>`
    text = re.sub(r":[\w.+:-]+:`~?!?([^`]*)`", r"\1", text)             # :role:`text`
    text = re.sub(r"`([^`<]+?)\s*<[^`>]+>`__?", r"\1", text)             # `text <url>`_
    text = re.sub(r"``([^`]+)``", r"\1", text)                           # ``literal``
    text = re.sub(r"`([^`]+)`_{0,2}", r"\1", text)                       # `text`_ / `interpreted`
    text = re.sub(r"\[(#|\*|\d+|#\w+)\]_", "", text)                     # footnote references
    text = re.sub(r"\*\*([^*]+)\*\*", r"\1", text)
    text = re.sub(r"(?<![\w*])\*([^*\s][^*]*)\*(?![\w*])", r"\1", text)
    text = re.sub(r"\|([\w -]+)\|_?", r"\1", text)                       # |substitution|
    text = re.sub(r"(?<=\w)_(?=[\s.,;:)]|$)", "", text)                  # word_ references
    text = text.replace("\\ ", "").replace("\\", "")
    return norm_space(text)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def parse_rst(source: str) -> tuple[str, list[tuple[str, list[str]]]]:
    """reStructuredText to (title, sections). Literal blocks (after `::`), doctest blocks, tables,
    comments, and the bodies of directives other than admonitions and descriptions are dropped."""
    lines = source.expandtabs(8).replace("\r", "").split("\n")
    sections: list[tuple[str, list[str]]] = [("", [])]
    para: list[str] = []
    title = ""

    def flush():
        if para:
            block = para[:]
            para.clear()
            first = block[0].strip()
            if first.startswith(">>>"):
                return
            if sum(1 for ln in block if ln.strip()[:1] in "|+" or _RST_ADORN.match(ln.strip())
                   or re.match(r"^=+( +=+)+\s*$", ln.strip())) > len(block) / 2:
                return                                                    # grid/simple table
            text = " ".join(ln.strip() for ln in block)
            text = re.sub(r"^([-*+•]|#\.|\d+[.)]|\(\d+\)|[a-z][.)])\s+", "", text)   # list marker
            sections[-1][1].append(rst_inline(text))

    def heading(text: str):
        nonlocal title
        flush()
        text = rst_inline(text.strip())
        if not title:
            title = text
        sections.append((text, []))

    i, n = 0, len(lines)
    skip_indent = None             # drop lines indented more than this (literal/directive bodies)
    while i < n:
        line = lines[i]
        stripped = line.strip()
        if skip_indent is not None:
            if not stripped or _indent(line) > skip_indent:
                i += 1
                continue
            skip_indent = None
        if not stripped:
            flush()
            i += 1
            continue
        # overline + title + underline
        if _RST_ADORN.match(stripped) and i + 2 < n and lines[i + 1].strip() and \
                _RST_ADORN.match(lines[i + 2].strip()) and lines[i + 2].strip()[0] == stripped[0]:
            heading(lines[i + 1])
            i += 3
            continue
        # title + underline
        if i + 1 < n and _RST_ADORN.match(lines[i + 1].strip()) and not _RST_ADORN.match(stripped) \
                and len(lines[i + 1].strip()) >= min(len(stripped), 3) and not para and _indent(line) == 0:
            heading(line)
            i += 2
            continue
        if _RST_ADORN.match(stripped) and not para:                       # a transition
            i += 1
            continue
        m = re.match(r"^(\s*)\.\.\s+(?:([\w:.+-]+)::\s*(.*))?", line)
        if m and (stripped == ".." or stripped.startswith(".. ")):
            flush()
            name = (m.group(2) or "").lower()
            if name in _RST_KEEP_BODY:
                arg = m.group(3) or ""
                if name in ("rubric", "topic", "sidebar", "admonition") and arg:
                    sections[-1][1].append(rst_inline(arg))
                i += 1
                while i < n and lines[i].strip().startswith(":") and _indent(lines[i]) > _indent(line):
                    i += 1                                                # directive options
                continue
            skip_indent = _indent(line)                                   # comment or code-like
            i += 1
            continue
        if para and _indent(line) != _indent(para[0]) and not para[-1].rstrip().endswith("::"):
            if _indent(line) > _indent(para[0]) and re.match(r"^\s*[-*+]|^\s*\d+\.", para[0]) is None:
                para.append(line)                                         # definition body etc.
                i += 1
                continue
        para.append(line)
        if stripped.endswith("::"):
            # the paragraph introduces a literal block: keep its text (":" for "::"), drop the block
            para[-1] = re.sub(r"\s*::$", "" if stripped == "::" else ":", para[-1].rstrip())
            if not para[-1].strip():
                para.pop()
            base = _indent(para[0]) if para else _indent(line)
            flush()
            skip_indent = base
        i += 1
    flush()
    return title, [s for s in sections if s[1]]


_POD_ENT = {"lt": "<", "gt": ">", "verbar": "|", "sol": "/", "quot": '"', "amp": "&", "apos": "'"}


def pod_inline(text: str) -> str:
    def ent(m):
        e = m.group(1)
        if e in _POD_ENT:
            return _POD_ENT[e]
        if e.isdigit():
            return chr(int(e))
        return html.unescape(f"&{e};")

    def link(inner: str) -> str:
        if "|" in inner:
            return inner.split("|", 1)[0]
        inner = inner.strip('"')
        if "/" in inner and not inner.startswith("http"):
            page, _, sec = inner.partition("/")
            return sec.strip('"') or page
        return inner

    for _ in range(6):                                                    # nested codes
        before = text
        text = re.sub(r"([A-Z])<<+\s+(.*?)\s+>>+", lambda m: _pod_code(m.group(1), m.group(2), ent, link), text)
        text = re.sub(r"([A-Z])<([^<>]*)>", lambda m: _pod_code(m.group(1), m.group(2), ent, link), text)
        if text == before:
            break
    return norm_space(text)


def _pod_code(code, inner, ent, link):
    if code == "E":
        return ent(re.match(r"(.*)", inner))
    if code in "XZ":
        return ""
    if code == "L":
        return link(inner)
    return inner


def parse_pod(source: str) -> tuple[str, list[tuple[str, list[str]]]]:
    """POD to (title, sections): =head headings, =item text kept, verbatim (indented) paragraphs and
    =begin/=for blocks dropped. The title is the NAME section's first line."""
    sections: list[tuple[str, list[str]]] = [("", [])]
    blocks = re.split(r"\n[ \t]*\n", source.replace("\r", ""))
    title = ""
    in_begin = False
    for block in blocks:
        if not block.strip():
            continue
        if block.startswith("="):
            cmd, _, rest = block.partition(" ")
            cmd = cmd.split("\n")[0]
            rest = rest if " " in block.split("\n")[0] else block[len(cmd):]
            if cmd == "=begin":
                in_begin = True
            elif cmd == "=end":
                in_begin = False
            elif cmd.startswith("=head"):
                heading = pod_inline(rest)
                sections.append((heading, []))
            elif cmd == "=item":
                text = pod_inline(rest)
                text = re.sub(r"^(\*|\d+\.?)\s*", "", text)
                if text:
                    sections[-1][1].append(text)
            continue
        if in_begin or block[:1] in " \t":
            continue                                                      # verbatim: code
        text = pod_inline(block)
        if sections[-1][0] == "NAME" and not title:
            title = text
            continue
        sections[-1][1].append(text)
    return title, [s for s in sections if s[1] and s[0] != "NAME"]


class _HTMLText(HTMLParser):
    """Collects headings and block text; skips scripts, styles, <pre>, navigation and tables."""

    SKIP = {"script", "style", "pre", "head", "nav", "table", "svg", "math", "select", "button", "form"}
    SKIP_CLASS = {"navheader", "navfooter", "sphinxsidebar", "sphinxsidebarwrapper", "related", "footer",
                  "toc", "nav", "navigation", "navbar", "breadcrumbs", "headerlink", "sidebar", "menu", "search",
                  "copyright", "wy-nav-side", "rst-versions", "wy-breadcrumbs", "rst-footer-buttons"}
    BLOCK = {"p", "li", "dd", "dt", "div", "blockquote", "br", "section", "article", "tr", "ul", "ol", "dl",
             "figcaption", "caption", "body", "td", "th"}
    HEAD = {"h1", "h2", "h3", "h4", "h5", "h6"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.skip_stack: list[str] = []
        self.depth: dict[str, int] = {}
        self.buf: list[str] = []
        self.in_head = False
        self.title = ""
        self.html_title = ""
        self.in_title = False
        self.sections: list[tuple[str, list[str]]] = [("", [])]

    def _flush(self):
        text = norm_space("".join(self.buf))
        self.buf.clear()
        if not text:
            return
        if self.in_head:
            text = re.sub(r"^(\d+(\.\d+)*\.?|[A-Z]\.\d+(\.\d+)*\.?)\s+", "", text)   # numbering
            text = text.rstrip("¶#").strip()
            if not self.title:
                self.title = text
            self.sections.append((text, []))
        else:
            self.sections[-1][1].append(text)

    def handle_starttag(self, tag, attrs):
        if self.skip_stack:
            if tag == self.skip_stack[-1]:
                self.depth[tag] = self.depth.get(tag, 0) + 1
            return
        cls = dict(attrs).get("class") or ""
        role = dict(attrs).get("role") or ""
        if tag == "title":
            self.in_title = True
            return
        if tag in self.SKIP or (tag in ("div", "span", "a", "p", "section", "ul") and
                                (self.SKIP_CLASS & set(cls.split()) or role == "navigation")):
            if tag in ("span", "a", "p"):
                self.skip_stack.append(tag)
                self.depth[tag] = 0
                return
            self._flush()
            self.skip_stack.append(tag)
            self.depth[tag] = 0
            return
        if tag in self.HEAD:
            self._flush()
            self.in_head = True
        elif tag in self.BLOCK:
            self._flush()

    def handle_endtag(self, tag):
        if tag == "title":
            self.in_title = False
            return
        if self.skip_stack:
            if tag == self.skip_stack[-1]:
                if self.depth.get(tag, 0) == 0:
                    self.skip_stack.pop()
                else:
                    self.depth[tag] -= 1
            return
        if tag in self.HEAD:
            self._flush()
            self.in_head = False
        elif tag in self.BLOCK:
            self._flush()

    def handle_data(self, data):
        if self.in_title:
            self.html_title += data
            return
        if not self.skip_stack:
            self.buf.append(data)


def parse_html(source: str) -> tuple[str, list[tuple[str, list[str]]]]:
    """HTML to (title, sections): text of block elements; <pre>, tables, scripts, navigation skipped."""
    p = _HTMLText()
    p.feed(source)
    p.close()
    p._flush()
    title = p.title or norm_space(p.html_title)
    return title, [s for s in p.sections if s[1]]


def md_inline(text: str) -> str:
    text = re.sub(r"!\[[^\]]*\]\([^)]*\)", "", text)
    text = re.sub(r"\[([^\]]+)\]\[[^\]]*\]", r"\1", text)
    text = re.sub(r"\[([^\]]+)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"`+([^`]+)`+", r"\1", text)
    text = re.sub(r"(\*\*|__)(.+?)\1", r"\2", text)
    text = re.sub(r"(?<!\w)[*_]([^*_\s][^*_]*)[*_](?!\w)", r"\1", text)
    text = re.sub(r"<[^>]+>", "", text)
    return norm_space(html.unescape(text))


def parse_markdown(source: str) -> tuple[str, list[tuple[str, list[str]]]]:
    """Markdown to (title, sections): fenced and indented code, tables, HTML comments dropped."""
    source = re.sub(r"<!--.*?-->", "", source.replace("\r", ""), flags=re.S)
    sections: list[tuple[str, list[str]]] = [("", [])]
    title = ""
    para: list[str] = []
    fence = None

    def flush():
        if para:
            if sum(1 for ln in para if ln.lstrip().startswith("|")) <= len(para) / 2:
                text = re.sub(r"^([-*+]|\d+\.)\s+", "", " ".join(ln.strip() for ln in para))
                text = re.sub(r"^>\s*", "", text)
                sections[-1][1].append(md_inline(text))
            para.clear()

    for line in source.split("\n"):
        s = line.strip()
        if fence:
            if s.startswith(fence):
                fence = None
            continue
        if s.startswith("```") or s.startswith("~~~"):
            flush()
            fence = s[:3]
            continue
        m = re.match(r"^(#{1,6})\s+(.*?)\s*#*$", s)
        if m:
            flush()
            head = md_inline(m.group(2))
            if not title:
                title = head
            sections.append((head, []))
            continue
        if not s:
            flush()
            continue
        if line.startswith("    ") and not para:
            continue                                                      # indented code
        para.append(line)
    flush()
    return title, [s for s in sections if s[1]]


_MAN_ESC = {r"\-": "-", r"\(em": "—", r"\(en": "–", r"\(aq": "'", r"\(dq": '"', r"\(lq": '"', r"\(rq": '"',
            r"\(oq": "'", r"\(cq": "'", r"\(bu": "", r"\(co": "©", r"\(rg": "®", r"\(ti": "~", r"\(ha": "^",
            r"\e": "\\", r"\&": "", r"\~": " ", r"\ ": " ", r"\|": "", r"\^": "", r"\:": "", r"\%": "", r"\c": ""}


def man_inline(text: str) -> str:
    """roff escapes to plain text: fonts (\fB, \f[I], \f(CW), named characters, spacing escapes."""
    text = re.sub(r"\\f(\[[^\]]*\]|\(..|.)", "", text)
    text = re.sub(r"\\s[+-]?\d", "", text)
    for k, v in _MAN_ESC.items():
        text = text.replace(k, v)
    text = re.sub(r"\\\*(\(..|\[[^\]]*\]|.)", "", text)                 # strings
    text = re.sub(r"\\[(\[][^ \]]{1,3}\]?", "", text)                  # other named characters
    return norm_space(text)


def parse_man(source: str) -> tuple[str, list[tuple[str, list[str]]]]:
    """A man page (roff, man macros) to (title, sections): .SH/.SS headings, paragraph macros break
    paragraphs, font macros keep their words, .nf/.EX blocks (examples, code) and tables dropped.
    The title is the NAME section's line."""
    sections: list[tuple[str, list[str]]] = [("", [])]
    para: list[str] = []
    skip = None
    title = ""

    def flush():
        if para:
            sections[-1][1].append(man_inline(" ".join(para)))
            para.clear()

    for line in source.replace("\r", "").split("\n"):
        if skip:
            if re.match(skip, line):
                skip = None
            continue
        if line.startswith((".\\\"", "'\\\"", '.\\"')) or line.startswith("\\\""):
            continue
        if line.startswith((".", "'")):
            m = re.match(r"^[.'](\w+)\s*(.*)$", line)
            if not m:
                continue
            mac, arg = m.group(1), m.group(2)
            if mac in ("SH", "SS"):
                flush()
                sections.append((man_inline(arg.strip('"')).title() if mac == "SH" and arg.isupper() else man_inline(arg.strip('"')), []))
            elif mac in ("nf", "EX"):
                flush()
                skip = r"^[.'](fi|EE)\b"
            elif mac == "TS":
                flush()
                skip = r"^[.']TE\b"
            elif mac in ("de", "ig"):
                skip = r"^\.\.\s*$"
            elif mac in ("PP", "P", "LP", "TP", "IP", "sp", "br", "HP", "RS", "RE", "TQ", "in"):
                flush()
                if mac == "IP" and arg and not arg.startswith(("\\(bu", "\\[bu]", "*", "-", '"\\(bu')):
                    pass
            elif mac in ("B", "I", "SM", "SB", "BR", "RB", "IR", "RI", "BI", "IB", "UR", "MT", "UE", "ME", "Nm", "Ar"):
                words_ = re.findall(r'"([^"]*)"|(\S+)', arg)
                sep = "" if mac in ("BR", "RB", "IR", "RI", "BI", "IB") else " "
                para.append(sep.join(a or b for a, b in words_))
            continue
        if not line.strip():
            flush()
            continue
        para.append(line)
    flush()
    for head, paras in sections:
        if head.lower() == "name" and paras:
            title = paras[0]
    return title, [s for s in sections if s[1] and s[0].lower() != "name"]


def parse_vimhelp(source: str) -> tuple[str, list[tuple[str, list[str]]]]:
    """A Vim help file to (title, sections): a line of ===== or ----- starts a section whose heading
    is the next line's text (its *tags* and numbering dropped); examples (from a line ending in `>`
    to the next unindented line or `<`) dropped; |links| and *tags* kept as words / dropped."""
    lines = source.replace("\r", "").expandtabs(8).split("\n")
    sections: list[tuple[str, list[str]]] = [("", [])]
    para: list[str] = []
    in_example = False
    title = ""
    expect_heading = False

    def clean(text):
        text = re.sub(r"\*[^*\s]+\*", "", text)
        text = re.sub(r"\|([^|\s]+)\|", r"\1", text)
        text = re.sub(r"`([^`]+)`", r"\1", text)
        return norm_space(text.replace(" ~", ""))

    def flush():
        if para:
            sections[-1][1].append(clean(" ".join(para)))
            para.clear()

    for i, line in enumerate(lines):
        s = line.strip()
        if i == 0:
            m = re.match(r"^\*\S+\*\s*(.*)$", s)
            title = clean(m.group(1)) if m else clean(s)
            continue
        if in_example:
            if s == "<" or s.startswith("< ") or (s and not line[:1].isspace()):
                in_example = False
                if s.startswith("<"):
                    continue
            else:
                continue
        if re.fullmatch(r"[=-]{20,}", s):
            flush()
            expect_heading = True
            continue
        if expect_heading and s:
            expect_heading = False
            head = re.sub(r"^\d+(\.\d+)*\.?\s+", "", clean(s))
            sections.append((head, []))
            continue
        if not s:
            flush()
            continue
        if s.endswith(" >") or s == ">":
            para.append(line.rstrip()[:-1])
            flush()
            in_example = True
            continue
        para.append(line)
    flush()
    if not title:
        title = "Vim help"
    return title, [x for x in sections if x[1]]


def info_inline(text: str) -> str:
    text = re.sub(r'\[image src="[^"]*"(\s+alt="[^"]*")?[^\]]*\]', "", text)
    text = re.sub(r"\*[Nn]ote\s+([^:]+?)::", r"\1", text)
    text = re.sub(r"\*[Nn]ote\s+[^:]*?:\s*([^.,]+)[.,]", r"\1", text)
    text = re.sub(r"‘([^’]*)’", r"\1", text).replace("’", "'")
    text = re.sub(r"`([^']*)'", r"\1", text)
    return norm_space(text)


def parse_info(source: str) -> tuple[str, list[tuple[str, list[str]]]]:
    """A GNU Info file to (title, sections): each underlined heading (else each node's name) starts
    a section; menus, images and example lines (indented 5+ spaces) dropped; `*note X::` kept as X.
    The title is the first heading of the file."""
    sections: list[tuple[str, list[str]]] = []
    title = ""
    for node in source.replace("\r", "").split("\x1f")[1:]:
        lines = node.strip("\n").split("\n")
        m = re.search(r"Node:\s*([^,]+)", lines[0]) if lines else None
        if not m:
            continue
        sections.append((m.group(1).strip(), []))
        body = lines[1:]
        cur: list[str] = []

        def flush():
            if cur:
                text = info_inline(" ".join(cur))
                example = all(_indent(ln) >= 5 for ln in cur) and not (
                    mostly_prose(text) and re.search(r"[a-z]{3,} [a-z]{2,} [a-z]{3,}", text))
                if text and not example and not (cur[0].startswith("* ") and "::" in cur[0]):
                    sections[-1][1].append(text)
                cur.clear()

        skip_next = False
        for i, line in enumerate(body):
            if skip_next:
                skip_next = False
                continue
            if i + 1 < len(body) and line.strip() and re.fullmatch(r"[*=.-]{3,}", body[i + 1].strip()):
                flush()
                heading = re.sub(r"^(\d+(\.\d+)*|[A-Z](\.\d+)+|Appendix [A-Z](\.\d+)*)\.?\s+", "", line.strip())
                title = title or heading
                sections.append((heading, []))
                skip_next = True
                continue
            if line.startswith("* Menu:"):
                break
            if not line.strip():
                flush()
                continue
            cur.append(line)
        flush()
    return title, [x for x in sections if x[1]]


# dictd ------------------------------------------------------------------------------------------

_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def b64_number(s: str) -> int:
    value = 0
    for ch in s:
        value = value * 64 + _B64.index(ch)
    return value


def dictd_entries(index_text: str, data: bytes) -> list[tuple[str, str]]:
    """(headword, entry text) for each distinct entry of a dictd database, in the order of the data
    file; the headword is the first index line pointing at the entry. The 00-database-* entries
    (the database's own notes) are skipped."""
    first: dict[tuple[int, int], str] = {}
    for line in index_text.split("\n"):
        parts = line.split("\t")
        if len(parts) < 3:
            continue
        head = parts[0]
        if head.startswith("00-database") or head.startswith("00database"):
            continue
        key = (b64_number(parts[1]), b64_number(parts[2]))
        first.setdefault(key, head)
    return [(head, data[off:off + size].decode("utf-8", "replace")) for (off, size), head in sorted(first.items())]


# GCIDE's ASCII renderings of accented letters and ligatures, e.g. [ae], ['e], [=o], [imac].
_GCIDE_ENT = {"ae": "ae", "AE": "AE", "oe": "oe", "OE": "OE", "aum": "a", "eum": "e", "ium": "i", "oum": "o",
              "uum": "u", "imac": "i", "sect": "§", "deg": "°", "frac12": "1/2", "frac14": "1/4", "frac34": "3/4",
              "cced": "c", "ng": "ng", "th": "th", "edh": "th", "thorn": "th", "it": "", "ait": ""}
_GCIDE_SOURCE = re.compile(r"\[(?:\d{4} Webster|Webster \d{4}[^\]]*|PJC|WordNet[^\]]*|Century[^\]]*|"
                           r"RN[^\]]*|MW\d*|NetDict|CS|JV|Chambers[^\]]*|Bouvier)[^\]]*\]")


def strip_dictd(entry: str, source: str) -> list[str]:
    """One dictd entry to plain paragraphs (blank-line separated in the entry). GCIDE: the
    pronunciation (backslashes and the parenthesised respelling after it), source tags such as
    [1913 Webster], letter entities such as [ae] and ['e], and every paragraph taken from WordNet are
    dropped. All: {cross reference} braces, <domain> tags of FOLDOC kept as words, bare URLs dropped."""
    paras = []
    for block in re.split(r"\n[ \t]*\n", entry.replace("\r", "")):
        if source == "gcide":
            if "[WordNet" in block:
                continue
            block = re.sub(r"\\[^\\\n]*\\\s*(\([^)]*\))?", "", block)
            block = _GCIDE_SOURCE.sub("", block)
            block = re.sub(r"\[([a-zA-Z]{2,6})\]", lambda m: _GCIDE_ENT.get(m.group(1), m.group(0)), block)
            block = re.sub(r"\[[\^'\"`=.,~*-]?([a-zA-Z])[\^'\"`=.,~*-]?\]", r"\1", block)
            block = re.sub(r"\s+,", ",", block)
        block = block.replace("{", "").replace("}", "")
        block = re.sub(r"\(?https?://\S+\)?", "", block)
        text = norm_space(block)
        if text:
            paras.append(text)
    return paras


# ---------------------------------------------------------------------------------------------
# Passages

_SENT_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(\"'])")


def split_long(paragraph: str, max_words: int) -> list[str]:
    """A paragraph longer than max_words cut at sentence ends (a sentence longer than that at
    max_words words)."""
    if len(words(paragraph)) <= max_words:
        return [paragraph]
    out, cur = [], []
    for sent in _SENT_END.split(paragraph):
        w = words(sent)
        while len(w) > max_words:
            if cur:
                out.append(" ".join(cur))
                cur = []
            out.append(" ".join(w[:max_words]))
            w = w[max_words:]
        if cur and len(cur) + len(w) > max_words:
            out.append(" ".join(cur))
            cur = []
        cur.extend(w)
    if cur:
        out.append(" ".join(cur))
    return out


def pack_paragraphs(paragraphs: list[str], max_words: int) -> list[str]:
    """Greedy packing of paragraphs (in order) into passages of at most max_words words; a
    paragraph is only cut when it alone exceeds max_words."""
    out, cur, cur_n = [], [], 0
    for para in paragraphs:
        for piece in split_long(norm_space(para), max_words):
            n = len(words(piece))
            if cur and cur_n + n > max_words:
                out.append(" ".join(cur))
                cur, cur_n = [], 0
            cur.append(piece)
            cur_n += n
    if cur:
        out.append(" ".join(cur))
    return out


def mostly_prose(text: str) -> bool:
    """At least 60% of the tokens are words (letters, possibly with trailing punctuation)."""
    toks = words(text)
    if not toks:
        return False
    good = sum(1 for t in toks if re.fullmatch(r"[(\"']?[A-Za-z][a-z'-]*[)\"',.;:!?]*", t))
    return good >= 0.6 * len(toks)


def document_passages(title: str, sections, max_words: int, min_words: int):
    """(heading, passage text) pairs of one document, sections never mixed."""
    out = []
    for heading, paras in sections:
        for text in pack_paragraphs([p for p in paras if p], max_words):
            if len(words(text)) >= min_words and mostly_prose(text):
                out.append((heading, text))
    return out


# ---------------------------------------------------------------------------------------------
# Packages: download, verify, read

def deb_filename(name: str, version: str) -> str:
    return f"{name}_{version.replace(':', '%3a')}_all.deb"


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def fetch_package(name: str, version: str, sha: str, cache: Path) -> Path:
    """The verified .deb in cache, downloaded with apt-get when absent. A file whose SHA-256 is not
    the pinned one is refused (and left where it is, for inspection)."""
    path = cache / deb_filename(name, version)
    if not path.exists():
        tmp = cache / "partial"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        try:
            r = subprocess.run(["apt-get", "download", "-q", f"{name}={version}"], cwd=tmp, capture_output=True, text=True)
        except FileNotFoundError:
            raise BuildError(f"{name} {version} is not in {cache} and apt-get is not on PATH (a Debian system is needed)")
        got = list(tmp.glob("*.deb"))
        if r.returncode != 0 or len(got) != 1 or got[0].name != path.name:
            msg = (r.stderr.strip().splitlines() or ["no file"])[-1]
            raise BuildError(f"{name}: version {version} could not be downloaded ({msg}); is `apt-get update` done?")
        got[0].rename(path)
        shutil.rmtree(tmp, ignore_errors=True)
    actual = sha256_file(path)
    if actual != sha:
        raise BuildError(f"{name} {version}: {path} has SHA-256 {actual}, pinned {sha}; refused")
    return path


def deb_members(path: Path, pattern: str, exclude: str | None):
    """(path inside the package, bytes) for the regular files of a .deb's data archive that match
    pattern and not exclude, in sorted path order (a .deb is an ar archive holding data.tar.*)."""
    with open(path, "rb") as f:
        if f.read(8) != b"!<arch>\n":
            raise BuildError(f"{path}: not a .deb (ar) archive")
        while True:
            header = f.read(60)
            if len(header) < 60:
                raise BuildError(f"{path}: no data.tar member")
            member = header[:16].decode().strip().rstrip("/")
            size = int(header[48:58].decode().strip())
            if member.startswith("data.tar"):
                blob = f.read(size)
                break
            f.seek(size + (size & 1), 1)
    out = []
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:*") as tar:
        for info in tar:
            if info.isfile() and re.search(pattern, info.name) and not (exclude and re.search(exclude, info.name)):
                out.append((info.name.lstrip("."), tar.extractfile(info).read()))
    return sorted(out)


def read_text(name: str, data: bytes) -> str:
    if name.endswith(".gz") and not name.endswith(".dict.dz"):
        data = gzip.decompress(data)
    return data.decode("utf-8", "replace")


PARSERS = {"rst": parse_rst, "pod": parse_pod, "html": parse_html, "md": parse_markdown, "man": parse_man,
           "vimhelp": parse_vimhelp, "info": parse_info}


def package_passages(kind: str, prefix: str, members, max_words: int, min_words: int):
    """[title, heading, text, source path] records of one package, in reading order. For dictd
    sources the heading is the headword."""
    records = []
    if kind == "dictd":
        index = next(read_text(n, d) for n, d in members if n.endswith(".index"))
        data = gzip.decompress(next(d for n, d in members if n.endswith(".dict.dz")))
        for head, entry in dictd_entries(index, data):
            paras = strip_dictd(entry, prefix)
            for text in pack_paragraphs(paras, max_words):
                if len(words(text)) >= 8 and mostly_prose(text):
                    records.append([head, head, text, ""])
        return records
    parse = PARSERS[kind]
    for name, blob in members:
        title, sections = parse(read_text(name, blob))
        doc = title or Path(name).name.split(".")[0]
        for heading, text in document_passages(doc, sections, max_words, min_words):
            records.append([doc, heading, text, name])
    return records


# ---------------------------------------------------------------------------------------------
# Queries

def wordnet_first_glosses(files: dict[str, str]) -> dict[str, str]:
    """word -> the gloss (definition, without its quoted examples) of the word's most frequent
    sense: in the part of speech where the word has the most sense-tagged occurrences (the index
    files' tagsense_cnt; ties: noun, verb, adjective, adverb), that part of speech's first synset.
    Single-word lowercase lemmas of 3+ letters only."""
    best: dict[str, tuple[int, int, str, str]] = {}
    for rank, pos in enumerate(("noun", "verb", "adj", "adv")):
        offsets = {}
        for line in files[f"data.{pos}"].split("\n"):
            if line[:1].isdigit() and " | " in line:
                offsets[line[:8]] = line.split(" | ", 1)[1]
        for line in files[f"index.{pos}"].split("\n"):
            if not line or line.startswith(" "):
                continue
            parts = line.split()
            lemma = parts[0]
            if not re.fullmatch(r"[a-z]{3,}", lemma):
                continue
            # lemma pos synset_cnt p_cnt [ptr_symbol]*p_cnt sense_cnt tagsense_cnt synset_offset...
            p_cnt = int(parts[3])
            tagged = int(parts[5 + p_cnt])
            synsets = parts[6 + p_cnt:]
            if not synsets or synsets[0] not in offsets:
                continue
            key = (-tagged, rank)
            if lemma not in best or key < best[lemma][:2]:
                best[lemma] = (-tagged, rank, pos, clean_gloss(offsets[synsets[0]]))
    return {lemma: v[3] for lemma, v in best.items()}


def clean_gloss(gloss: str) -> str:
    """The definition part of a WordNet gloss: the quoted examples and anything after them dropped."""
    gloss = gloss.split('"')[0]
    return norm_space(gloss.strip().rstrip(";").strip())


def _tokens(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def gloss_is_fair(word: str, gloss: str, relevant_texts: list[str]) -> bool:
    """The gloss has 4+ words, has no word that starts with the word (moons, moonlike) or shares
    its first 5 letters (inflections, mostly), and shares no 5-word sequence with a relevant passage."""
    toks = _tokens(gloss)
    if len(toks) < 4:
        return False
    stem = word[:5] if len(word) >= 5 else None
    for t in toks:
        if t.startswith(word) or (stem and t.startswith(stem)):
            return False
    grams = {tuple(toks[i:i + 5]) for i in range(len(toks) - 4)}
    for text in relevant_texts:
        rt = _tokens(text)
        if grams & {tuple(rt[i:i + 5]) for i in range(len(rt) - 4)}:
            return False
    return True


def hash_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def reverse_dictionary_queries(glosses: dict[str, str], gcide_by_head: dict[str, list[tuple[str, str]]],
                               count: int) -> list[tuple[str, str, list[str]]]:
    """(qid, gloss, relevant ids): words in SHA-256 order, kept while fair, until count."""
    out = []
    for word in sorted(glosses, key=lambda w: hash_key("rd:" + w)):
        rel = gcide_by_head.get(word, [])
        if not 1 <= len(rel) <= 4:
            continue
        if not gloss_is_fair(word, glosses[word], [t for _, t in rel]):
            continue
        out.append((f"rd-{word}", glosses[word], [pid for pid, _ in rel]))
        if len(out) == count:
            break
    return out


_GENERIC = re.compile(r"^(see also|introduction|overview|examples?|description|notes?|synopsis|summary|"
                      r"references?|bugs|author|authors|history|options|return values?|errors)$", re.I)


def section_queries(sections: dict[tuple[str, str], dict], count: int) -> list[tuple[str, str, list[str]]]:
    """(qid, heading, relevant ids). sections: (source, heading) -> {"title", "ids", "texts", "n"},
    where n counts the sections with that heading text in the whole collection."""
    by_heading: dict[str, list] = {}
    for (src, heading), info in sections.items():
        by_heading.setdefault(heading.lower(), []).append(info)
    chosen = []
    for key in sorted(by_heading, key=lambda h: hash_key("sec:" + h)):
        infos = by_heading[key]
        if len(infos) != 1:
            continue
        info = infos[0]
        heading = re.sub(r"^(\d+(\.\d+)*\.?|[A-Z]\.(\d+\.?)*)\s+", "", info["heading"])   # numbering
        toks = _tokens(heading)
        if len(toks) < 3 or len(words(heading)) > 15 or _GENERIC.match(heading) or not mostly_prose(heading):
            continue
        if re.search(r"[()<>\[\]{}=/]|::|->|(public|private|protected|static|member|friend) functions|"
                     r"construct/copy", heading, re.I) or \
                sum(len(t) >= 3 and t.isalpha() for t in toks) < 3:
            continue                                                      # code signatures, not words
        if heading.lower() == info["title"].lower() or info["n"] != 1:
            continue
        if not 1 <= len(info["ids"]) <= 10:
            continue
        flat = " ".join(toks)
        if any(flat in " ".join(_tokens(t)) for t in info["texts"]):
            continue
        chosen.append((heading, info))
        if len(chosen) == count:
            break
    return [(f"sec-{i + 1:04d}", heading, list(info["ids"])) for i, (heading, info) in enumerate(chosen)]


def is_dev(qid: str, dev_fraction: float) -> bool:
    return int(hash_key("split:" + qid)[:8], 16) / 2 ** 32 < dev_fraction


# ---------------------------------------------------------------------------------------------
# Output

def gzip_bytes_deterministic(path: Path, lines):
    """Write lines (str) as gzip with mtime 0 and no file name, so equal lines give equal bytes."""
    with open(path, "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=6) as gz:
            buf = []
            for line in lines:
                buf.append(line)
                if len(buf) >= 4096:
                    gz.write("".join(buf).encode("utf-8"))
                    buf.clear()
            gz.write("".join(buf).encode("utf-8"))


def write_atomic(path: Path, data: bytes):
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def progress(iterable, **kw):
    try:
        from tqdm import tqdm
    except ImportError:                                                   # pragma: no cover
        return iterable
    return tqdm(iterable, **kw)


def build(out: Path, cache: Path, args) -> dict:
    start = time.time()
    building = out.with_name(out.name + ".building")
    parts = building / "parts"
    parts.mkdir(parents=True, exist_ok=True)
    cache.mkdir(parents=True, exist_ok=True)
    settings = {"max_words": args.max_words, "min_words": args.min_words, "queries": args.queries,
                "sections": args.sections, "dev_fraction": args.dev_fraction, "builder_version": BUILDER_VERSION}
    stamp = json.dumps(settings, sort_keys=True)
    stamp_file = building / "settings.json"
    if stamp_file.exists() and stamp_file.read_text() != stamp:
        shutil.rmtree(parts)                                              # other settings: parse anew
        parts.mkdir()
    stamp_file.write_text(stamp)

    debs = {}
    for name, version, sha, *_ in progress(PACKAGES, desc="download+verify", unit="pkg", file=sys.stderr):
        debs[name] = fetch_package(name, version, sha, cache)

    records_by_pkg = {}
    wordnet = {}
    for name, version, sha, kind, prefix, pattern, exclude in progress(PACKAGES, desc="parse", unit="pkg", file=sys.stderr):
        members = deb_members(debs[name], pattern, exclude)
        if not members:
            raise BuildError(f"{name}: no file matches {pattern}")
        if kind == "wordnet":
            wordnet = {Path(n).name: d.decode("utf-8", "replace") for n, d in members}
            continue
        part = parts / f"{name}.json.gz"
        if part.exists():
            records_by_pkg[name] = json.loads(gzip.decompress(part.read_bytes()))
            continue
        records = package_passages(kind, prefix, members, args.max_words, args.min_words)
        write_atomic(part, gzip.compress(json.dumps(records).encode(), mtime=0))
        records_by_pkg[name] = records

    # ids, dedup
    corpus = []                     # (id, title, text)
    seen = set()
    gcide_by_head: dict[str, list[tuple[str, str]]] = {}
    sections: dict[tuple[str, str], dict] = {}
    heading_count: dict[str, int] = {}
    source_counts = {}
    for name, version, sha, kind, prefix, pattern, exclude in PACKAGES:
        if kind == "wordnet":
            continue
        n = 0
        for title, heading, text, path in records_by_pkg[name]:
            key = hashlib.sha1(text.lower().encode()).digest()
            if key in seen:
                continue
            seen.add(key)
            n += 1
            pid = f"{prefix}-{n}"
            corpus.append((pid, title, text))
            if prefix == "gcide":
                gcide_by_head.setdefault(title.lower(), []).append((pid, text))
            elif kind != "dictd" and heading:
                skey = (f"{name}:{path}", heading)
                info = sections.setdefault(skey, {"title": title, "heading": heading, "ids": [], "texts": []})
                info["ids"].append(pid)
                info["texts"].append(text)
        source_counts[prefix] = n
    for (src, heading), info in sections.items():
        heading_count[heading.lower()] = heading_count.get(heading.lower(), 0) + 1
    for (src, heading), info in sections.items():
        info["n"] = heading_count[heading.lower()]

    glosses = wordnet_first_glosses(wordnet)
    queries = reverse_dictionary_queries(glosses, gcide_by_head, args.queries)
    if len(queries) < args.queries:
        raise BuildError(f"only {len(queries)} reverse-dictionary queries could be built, {args.queries} asked")
    secq = section_queries(sections, args.sections) if args.sections else []
    if len(secq) < args.sections:
        raise BuildError(f"only {len(secq)} section queries could be built, {args.sections} asked")
    queries += secq

    # write
    gzip_bytes_deterministic(building / "corpus.jsonl.gz", progress(
        (json.dumps({"_id": pid, "title": title, "text": text}, ensure_ascii=False) + "\n" for pid, title, text in corpus),
        desc="write corpus", unit="passage", total=len(corpus), file=sys.stderr, mininterval=2))
    splits = {"dev": [], "test": []}
    for q in queries:
        splits["dev" if is_dev(q[0], args.dev_fraction) else "test"].append(q)
    for split, qs in splits.items():
        (building / f"queries.{split}.tsv").write_text("".join(f"{qid}\t{text}\n" for qid, text, _ in qs))
        (building / f"qrels.{split}.trec").write_text("".join(f"{qid} 0 {pid} 1\n" for qid, _, rel in qs for pid in rel))

    files = ["corpus.jsonl.gz", "queries.dev.tsv", "queries.test.tsv", "qrels.dev.trec", "qrels.test.trec"]
    n_words = sum(len(words(t)) for _, _, t in corpus)
    manifest = {
        "name": NAME,
        "distribution": "Debian 12 (bookworm), main",
        "settings": settings,
        "packages": [{"package": n, "version": v, "deb": deb_filename(n, v), "sha256": s,
                      "use": "queries (WordNet glosses)" if k == "wordnet" else f"passages {p}-*"}
                     for n, v, s, k, p, *_ in PACKAGES],
        "counts": {"passages": len(corpus), "words": n_words, "passages_by_source": source_counts,
                   "queries": {split: len(qs) for split, qs in splits.items()},
                   "queries_by_kind": {"rd": sum(q[0].startswith("rd-") for q in queries),
                                       "sec": sum(q[0].startswith("sec-") for q in queries)},
                   "qrels": {split: sum(len(q[2]) for q in qs) for split, qs in splits.items()}},
        "files": {f: sha256_file(building / f) for f in files},
    }
    (building / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    shutil.rmtree(parts)
    stamp_file.unlink()
    os.rename(building, out)
    manifest["seconds"] = round(time.time() - start, 1)
    return manifest


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog="\n\n".join(__doc__.split("\n\n")[2:]),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--output", required=True, type=Path,
                    help="the collection folder to create (must not exist); built in OUTPUT.building/ and renamed when complete")
    ap.add_argument("--cache", type=Path, default=None,
                    help="where the downloaded .deb files are kept and re-verified (default: OUTPUT.debs next to OUTPUT)")
    ap.add_argument("--max-words", type=int, default=150, help="most words in a passage (default 150)")
    ap.add_argument("--min-words", type=int, default=20,
                    help="fewest words in a documentation passage (dictionary entries: 8; default 20)")
    ap.add_argument("--queries", type=int, default=1500, help="reverse-dictionary queries to build (default 1500)")
    ap.add_argument("--sections", type=int, default=600, help="section-heading queries to build (default 600; 0: none)")
    ap.add_argument("--dev-fraction", type=float, default=0.33,
                    help="share of the queries in the dev split, by a hash of the query id (default 0.33)")
    args = ap.parse_args(argv)
    try:
        if args.max_words < 10 or args.min_words < 1 or args.queries < 1 or args.sections < 0 or not 0 < args.dev_fraction < 1:
            raise BuildError("--max-words must be >= 10, --min-words and --queries >= 1, --sections >= 0, 0 < --dev-fraction < 1")
        out = args.output.resolve()
        if out.exists():
            raise BuildError(f"{out} exists already; remove it or choose another --output")
        if not out.parent.is_dir():
            raise BuildError(f"{out.parent} is not a folder")
        cache = (args.cache or out.with_name(out.name + ".debs")).resolve()
        manifest = build(out, cache, args)
    except BuildError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:                                                  # disk full, permissions
        print(f"error: {e.strerror or e}: {e.filename or ''}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted; run the same command again to resume", file=sys.stderr)
        return 130
    c = manifest["counts"]
    print(json.dumps({"output": str(out), "passages": c["passages"], "words": c["words"], "queries": c["queries"],
                      "qrels": c["qrels"], "seconds": manifest["seconds"], "files": manifest["files"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
