"""The toolkit inside other frameworks' pipelines: PyTerrier transformers (pyterrier.py; the public
face is `lsr_pyserini.pyterrier`)."""
