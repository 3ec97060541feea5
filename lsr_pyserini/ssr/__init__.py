"""SSR: single-stage sparse retrieval with TopK sparse-autoencoder neurons as Lucene pseudo-terms.

backbone.py (token embeddings of any HF encoder), sae.py (TopK SAE, its training, the SSR model
folder), codes.py (codes -> pseudo-terms). The token and code stores live in `stores/tokens.py`;
the command line (`embed`, `fit`, `index`) is `python -m lsr_pyserini.ssr` (__main__.py).
"""
