"""SSR: sparse-autoencoder neurons of a backbone's token embeddings as pseudo-terms.

One package: config.py, backbone.py, codes.py, encoder.py, reranker.py, sae.py, training.py."""
from . import config, backbone, codes, encoder, reranker, sae, training  # noqa: F401  (each registers what it offers)
