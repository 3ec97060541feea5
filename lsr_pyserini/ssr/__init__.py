"""SSR: single-stage sparse retrieval with TopK sparse-autoencoder neurons as Lucene pseudo-terms.

backbone.py (token embeddings of any HF encoder), store.py (token and code stores), sae.py (TopK
SAE, training, the SSR model folder), codes.py (codes -> pseudo-terms), index.py (`ssr index`);
the command line is `python -m lsr_pyserini.ssr` (__main__.py).
"""
