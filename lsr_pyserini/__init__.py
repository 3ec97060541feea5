"""lsr-pyserini: learned sparse retrieval encoders, rerankers and reproductions on Pyserini/Anserini."""

__version__ = "0.1.0"
