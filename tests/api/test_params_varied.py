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
