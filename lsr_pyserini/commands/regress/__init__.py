"""`python -m lsr_pyserini.regress`: command.py (flags), run.py (the reproduction runner behind `regress`
and `demo`: a YAML file's steps run, its runs scored and checked)."""
