"""The core every other layer stands on: errors, readers, the one writer, presets, Hugging Face
loading, command-line helpers, fusion, Java and WordPiece BM25. Nothing here imports a model
family, a store, a re-ranker or a command."""
