"""The commands that belong to no engine, one room each: argparse and orchestration. Each runs as
`python -m lsr_pyserini.NAME` through its door at the top of the package; nothing but a command
imports them (an engine's own command is its folder's command.py)."""
