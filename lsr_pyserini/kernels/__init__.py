"""Model kernels several families share: the vocabulary projection (vocabulary.py), the single-query
fast paths (fastpath.py), int8 inference (int8.py), compiled numba kernels (jit.py) and WordPiece BM25
(wordpiece_bm25.py). Each gives the numbers of the plain computation it replaces."""

QUANTIZE_CHOICES = ("none", "int8")  # the `quantize` setting's values; here, so that reading them imports no torch
