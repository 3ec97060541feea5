"""The search service: one backend (indexes, micro-batching, limits, reload) under thin REST, MCP
and page front ends, as Pyserini's `pyserini/server/` (backend + rest/ + mcp/) is laid out.

    served.py    what is served and its bounds (flags or a YAML file)
    batching.py  the micro-batcher: concurrent queries to one index searched together
    backend.py   the indexes as Searchers behind micro-batchers; documents, status, reload
    schemas.py   the fixed limits (index name, docid, query id) and the schema parts the front ends share
    rest.py      Pyserini-compatible REST routes (Pyserini 1.6's), keys
    rest_pyserini2.py  Pyserini 2's and Anserini's GET routes, with their refusals
    mcp.py       MCP tools over the same backend
    app.py       the ASGI app that puts them together
    __main__.py  python -m lsr_pyserini.serve (the command)
"""
