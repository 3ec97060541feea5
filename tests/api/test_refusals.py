"""The Python API refuses bad arguments as the commands refuse bad flags: every public entry point
(`lsr_pyserini.__all__`, api.py's names, the PyTerrier transformers) answers a wrong type or value
with one `InputError` line naming the argument (core/arguments.py), never a TypeError, ValueError,
KeyError or AttributeError from deep inside, and nothing silently taken ("10" for 10, a string for
a list of texts, one weight for two pipelines)."""
from __future__ import annotations

import pytest

from lsr_pyserini.core.errors import InputError

pt = pytest.importorskip("pyterrier")  # noqa: F841  pinned in the tested set: never skipped in CI


@pytest.fixture(scope="module")
def bm25(service_indexes):
    return str(service_indexes["bm25"])


@pytest.fixture(scope="module")
def searcher(bm25):
    from lsr_pyserini import Searcher

    searcher = Searcher(bm25)
    yield searcher
    searcher.close()


def _searcher(**arguments):
    from lsr_pyserini import Searcher

    return lambda bm25, searcher: Searcher(**{"index": bm25, **arguments})


def _call(method, *args, **kwargs):
    return lambda bm25, searcher: getattr(searcher, method)(*args, **kwargs)


def _lsr(name, *args, **kwargs):
    def make(bm25, searcher):
        import lsr_pyserini

        return getattr(lsr_pyserini, name)(*args, **kwargs)

    return make


def _pt(name, *args, **kwargs):
    def make(bm25, searcher):
        from lsr_pyserini import pyterrier as lsr

        return getattr(lsr, name)(*[bm25 if a is BM25 else a for a in args], **kwargs)

    return make


def _fusion(*pipelines, **kwargs):
    def make(bm25, searcher):
        from lsr_pyserini import pyterrier as lsr

        same = pt.apply.generic(lambda frame: frame)
        return lsr.Fusion(*[same if p is SAME else p for p in pipelines], **kwargs)

    return make


BM25, SAME = object(), object()
QUERY = "vitamin d"

# (entry point, bad arguments, what the one line must say)
CASES = [
    ("Searcher", _searcher(index=None), "index: expected a path"),
    ("Searcher", _searcher(index=42), "index: expected a path"),
    ("Searcher", _searcher(index=[]), "index: expected a path or a list of paths"),
    ("Searcher", _searcher(engine="nope"), "'nope'"),
    ("Searcher", _searcher(engine=3), "engine: expected a name"),
    ("Searcher", _searcher(encoder=5), "encoder: expected a name or a path"),
    ("Searcher", _searcher(reranker=5), "reranker: expected a name"),
    ("Searcher", _searcher(store=7, reranker="dense"), "store: expected a path"),
    ("Searcher", _searcher(fusion="max"), "fusion: invalid choice: 'max'"),
    ("Searcher", _searcher(candidates=0), "candidates: expected an integer >= 1"),
    ("Searcher", _searcher(candidates="10"), "candidates: expected an integer >= 1, got '10'"),
    ("Searcher", _searcher(interpolate=1.5), "interpolate: expected a number in [0, 1]"),
    ("Searcher", _searcher(engine_options=["k1"]), "engine_options: expected a dict"),
    ("Searcher", _searcher(engine_options={"nope": 1}), "nope"),
    ("Searcher", _searcher(encoder_options="query_max_length=8"), "encoder_options: expected a dict"),
    ("Searcher", _searcher(reranker_options=[1]), "reranker_options: expected a dict"),
    ("Searcher", _searcher(bm25=(0.9,)), "bm25: expected (k1, b)"),
    ("Searcher", _searcher(bm25=("0.9", 0.4)), "k1: expected"),
    ("Searcher", _searcher(encoded="yes"), "encoded: expected True or False"),
    ("Searcher", _searcher(device="gpu"), "device:"),
    ("Searcher", _searcher(dtype="float64"), "dtype: invalid choice: 'float64'"),
    ("Searcher.search", _call("search", QUERY, k=0), "k: expected an integer >= 1, got 0"),
    ("Searcher.search", _call("search", QUERY, k=-1), "k: expected an integer >= 1, got -1"),
    ("Searcher.search", _call("search", QUERY, k="10"), "k: expected an integer >= 1, got '10'"),
    ("Searcher.search", _call("search", QUERY, k=2.5), "k: expected an integer >= 1, got 2.5"),
    ("Searcher.search", _call("search", None), "text: expected a string"),
    ("Searcher.search", _call("search", [QUERY]), "text: expected a string"),
    ("Searcher.search", _call("search", QUERY, explain="yes"), "explain: expected True or False"),
    ("Searcher.batch_search", _call("batch_search", QUERY, ["q1"]), "texts: expected a list of strings"),
    ("Searcher.batch_search", _call("batch_search", [None], ["q1"]), "texts: expected a list of strings"),
    ("Searcher.batch_search", _call("batch_search", [QUERY], "q1"), "qids: expected a list of query ids"),
    ("Searcher.batch_search", _call("batch_search", [QUERY], [1.5]), "qids: query ids are strings or integers"),
    ("Searcher.batch_search", _call("batch_search", [QUERY], ["q1"], threads=0), "threads: expected an integer"),
    ("Searcher.batch_search", _call("batch_search", [QUERY], ["q1"], k="5"), "k: expected an integer >= 1"),
    ("Searcher.encode_queries", _call("encode_queries", QUERY, ["q1"]), "texts: expected a list of strings"),
    ("Searcher.search_encoded", _call("search_encoded", [""], ["q1"], {"a": 1}), "queries: expected a list of 1"),
    ("Searcher.search_encoded", _call("search_encoded", [""], ["q1"], [{"a": 1}], threads="2"), "threads:"),
    ("Searcher.doc", _call("doc", None), "docid: expected a string or an integer"),
    ("Searcher.docs", _call("docs", "d1"), "docids: expected a list of document ids"),
    ("Searcher.doc_fields", _call("doc_fields", 3), "docids: expected a list of document ids"),
    ("load_encoder", _lsr("load_encoder", None), "name_or_path: expected a name or a path"),
    ("load_encoder", _lsr("load_encoder", "splade-tiny", dtype="float64"), "dtype: invalid choice"),
    ("QueryEncoder", _lsr("QueryEncoder", 5), "name_or_path: expected a name or a path"),
    ("encoder_settings", _lsr("encoder_settings", ["splade-tiny"]), "name_or_path: expected a name or a path"),
    ("encoder_settings", _lsr("encoder_settings", "splade-tiny", no_such_setting=1), "no_such_setting"),
    ("choose_engine", lambda bm25, searcher: __import__("lsr_pyserini.api").api.choose_engine(None, None),
     "index: expected a path"),
    ("start_jvm", _lsr("start_jvm", heap="lots"), "heap: expected a Java heap size such as 512m or 4g"),
    ("start_jvm", _lsr("start_jvm", heap=4), "heap: expected a Java heap size"),
    ("Retriever", _pt("Retriever", BM25, k=0), "k: expected an integer >= 1, got 0"),
    ("Retriever", _pt("Retriever", BM25, k="10"), "k: expected an integer >= 1, got '10'"),
    ("Retriever", _pt("Retriever", BM25, threads=0), "threads: expected an integer >= 1"),
    ("Retriever", _pt("Retriever", None), "index: expected a path"),
    ("Reranker", _pt("Reranker", "dense", None), "store: expected a path"),
    ("Reranker", _pt("Reranker", "dense", BM25, interpolate=2), "interpolate: expected a number in [0, 1]"),
    ("Reranker", _pt("Reranker", "dense", BM25, fusion="max"), "fusion: invalid choice: 'max'"),
    ("Fusion", _fusion(SAME, SAME, weights=[1.0]), "weights: 1 given for 2 pipelines"),
    ("Fusion", _fusion(SAME, SAME, weights=[1.0, "x"]), "weights: expected a finite number, got 'x'"),
    ("Fusion", _fusion(SAME, SAME, weights=0.5), "weights: expected a list of numbers"),
    ("Fusion", _fusion(SAME, SAME, depth=0), "depth: expected an integer >= 1"),
    ("Fusion", _fusion(SAME, "bm25"), "Fusion: expected PyTerrier transformers"),
    ("Fusion", _fusion(SAME, SAME, method="max"), "unknown method 'max'"),
    ("doc_encoder", _pt("doc_encoder", "splade-tiny", text_field=5), "text_field: expected a column name"),
    ("query_encoder", _pt("query_encoder", None), "encoder: expected a name or a path"),
    ("Indexer", _pt("Indexer", "/nonexistent/x", engine="nope"), "engine: invalid choice: 'nope'"),
    ("Indexer", _pt("Indexer", "/nonexistent/x", engine="dense"), "has no index command to build with"),
    ("Indexer", _pt("Indexer", "/nonexistent/x", engine="pisa", no_such=1), "'no_such' is not a build option"),
    ("Indexer", _pt("Indexer", "/nonexistent/x", engine="bm25"), "give encoder=None"),
    ("Indexer", _pt("Indexer", None), "index: expected a path"),
]


@pytest.mark.parametrize("entry, call, expected", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_a_bad_argument_is_one_input_error_line_naming_it(entry, call, expected, bm25, searcher):
    with pytest.raises(Exception) as caught:
        call(bm25, searcher)
    assert type(caught.value) is InputError or isinstance(caught.value, InputError), \
        f"{entry}: {type(caught.value).__name__}: {caught.value}"
    message = str(caught.value)
    assert "\n" not in message and expected in message, message


def test_every_public_name_has_a_row():
    """Each name of `lsr_pyserini.__all__` that takes arguments, and each PyTerrier transformer, is
    in the table (a new entry point gets its refusals checked here)."""
    import lsr_pyserini
    from lsr_pyserini import pyterrier

    takes_arguments = set(lsr_pyserini.__all__) - {"Hit", "TermMatch", "InputError"}  # data classes, the error
    covered = {entry.split(".")[0] for entry, _, _ in CASES}
    assert takes_arguments | set(pyterrier.__all__) - {"DocEncoder", "QueryEncoder"} <= covered
