"""API keywords that no test gave a non-default value before the audit of defaults
(tests/audit_defaults.py), each given one here with its effect asserted: the query encoder's and
Searcher's device and dtype (bfloat16 changes the weights on a CPU too; a device this machine lacks
is refused, so the value is read), and the progress bar the encoders advance."""
from __future__ import annotations

import pytest

from conftest import SAMPLE
from lsr_pyserini.core.errors import InputError

TEXTS = [line.split("\t", 1)[1] for line in (SAMPLE / "queries.test.tsv").read_text().splitlines()]
ABSENT = "cuda:99"  # no machine has it: refused wherever the tests run


class Counted:
    """A tqdm-like progress bar that counts what it is advanced by."""

    def __init__(self):
        self.n = 0

    def update(self, n=1):
        self.n += n


def test_query_encoder_device_dtype_and_progress():
    import lsr_pyserini

    encoder = lsr_pyserini.QueryEncoder("splade-tiny")
    assert lsr_pyserini.QueryEncoder("splade-tiny", dtype="bfloat16").batch_encode(TEXTS) != encoder.batch_encode(TEXTS)
    with pytest.raises(InputError, match=ABSENT):
        lsr_pyserini.QueryEncoder("splade-tiny", device=ABSENT).encode(TEXTS[0])
    counted, floats = Counted(), Counted()
    encoder.batch_encode(TEXTS, progress=counted)
    encoder.encode_floats(TEXTS, progress=floats)
    assert counted.n == floats.n == len(TEXTS)


def test_searcher_device_and_dtype(service_indexes):
    import lsr_pyserini

    qids = [str(number) for number in range(len(TEXTS))]
    index = str(service_indexes["splade"])
    plain = lsr_pyserini.Searcher(index, encoder="splade-tiny").batch_search(TEXTS, qids, k=5)
    assert lsr_pyserini.Searcher(index, encoder="splade-tiny", dtype="bfloat16").batch_search(TEXTS, qids, k=5) != plain
    with pytest.raises(InputError, match=ABSENT):
        lsr_pyserini.Searcher(index, encoder="splade-tiny", device=ABSENT).batch_search(TEXTS, qids, k=5)


def test_searcher_encoded_takes_the_queries_as_they_are_encoded(service_indexes):
    """encoded=True: no encoder (an impact index refuses a Searcher without one otherwise), and the
    encoder's own queries given encoded rank as the encoder's Searcher ranks their texts."""
    import lsr_pyserini

    index = str(service_indexes["splade"])
    qids = [str(number) for number in range(len(TEXTS))]
    with pytest.raises(InputError):
        lsr_pyserini.Searcher(index)
    queries = lsr_pyserini.QueryEncoder("splade-tiny").batch_encode(TEXTS)
    given = lsr_pyserini.Searcher(index, encoded=True).search_encoded(TEXTS, qids, queries, k=5)
    expected = lsr_pyserini.Searcher(index, encoder="splade-tiny").batch_search(TEXTS, qids, k=5)
    assert {qid: [(h.docid, h.score) for h in hits] for qid, hits in given.items()} == \
        {qid: [(h.docid, h.score) for h in hits] for qid, hits in expected.items()}


def test_sharded_min_idf_drops_the_common_query_terms(service_indexes):
    import lsr_pyserini

    shards = [str(service_indexes["splade"])] * 2
    qids = [str(number) for number in range(len(TEXTS))]
    every = lsr_pyserini.Searcher(shards, encoder="splade-tiny", engine="sharded").batch_search(TEXTS, qids, k=24)
    pruned = lsr_pyserini.Searcher(shards, encoder="splade-tiny", engine="sharded",
                                   engine_options={"min_idf": 1.5}).batch_search(TEXTS, qids, k=24)
    assert sum(len(hits) for hits in pruned.values()) < sum(len(hits) for hits in every.values())
