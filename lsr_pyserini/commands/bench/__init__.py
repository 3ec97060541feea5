"""`python -m lsr_pyserini.bench`: command.py (flags and the run), measure.py (prefixes, builds, timed
searches, scores), plot.py (the table and the plot)."""
