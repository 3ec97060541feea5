"""bench's output: the table it prints and the plot of p50 latency against size (log-log, one panel per depth).

Each engine has one colour of Okabe and Ito's colour-blind-safe palette, the same in every plot (Lucene
blue, PISA vermillion: the two most compared are never two shades of one hue); several settings of
one engine share its colour and differ by line style, an engine timed end to end too ("[e2e]" after
its name: from the query's text, its encoding included).
"""
from __future__ import annotations

# Okabe & Ito (2008), "Color Universal Design": distinguishable under the common colour blindnesses
ENGINE_COLOURS = {"lucene": "#0072B2", "pisa": "#D55E00", "seismic": "#009E73", "bmp": "#CC79A7",
                  "bm25": "#000000", "milvus": "#E69F00", "sharded": "#56B4E9", "dense": "#999999",
                  "pyserini": "#AA4499"}
OTHER_COLOURS = ("#F0E442", "#882255", "#44AA99", "#332288")  # engines of one's own, in order met
STYLES = ("-", "--", ":", "-.")
END_TO_END = " [e2e]"
END_TO_END_NOTE = ("[e2e]: timed from the query's text to the top k docids, its encoding (or BM25's analyzer) included; "
                   "the other rows from queries encoded beforehand")
PREFIX_NOTE = ("note: nDCG@10 and MRR@10 of a prefix (a size below the whole collection) are computed against the "
               "whole collection's qrels, so relevant documents outside the prefix count as missed")


def shown_label(row: dict) -> str:
    """The row's engine as the table, the plot and the growth exponents name it: "[e2e]" after an
    engine timed from the query's text."""
    return row["engine"] + (END_TO_END if row.get("end_to_end") else "")


def engine_styles(rows: list[dict]) -> dict[str, tuple[str, str]]:
    """{label: (colour, line style)}: the colour of the row's engine, a style per setting of it (an
    end-to-end row is a setting of its engine)."""
    styles, others, used = {}, {}, {}
    for row in rows:
        label = shown_label(row)
        if label in styles:
            continue
        name = row.get("name", label)
        if name not in ENGINE_COLOURS and name not in others:
            others[name] = OTHER_COLOURS[len(others) % len(OTHER_COLOURS)]
        colour = ENGINE_COLOURS.get(name) or others[name]
        styles[label] = (colour, STYLES[used.get(name, 0) % len(STYLES)])
        used[name] = used.get(name, 0) + 1
    return styles


def plot(rows: list[dict], ks: list[int], path: str, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = list(dict.fromkeys(shown_label(row) for row in rows))
    columns = 1 if max((len(label) for label in labels), default=0) > 45 else 2  # long engine options: one a line
    rows_of_legend = (len(labels) + columns - 1) // columns
    figure, axes = plt.subplots(1, len(ks), figsize=(6 * len(ks), 4.5 + 0.22 * rows_of_legend), squeeze=False)
    styles = engine_styles(rows)
    for axis, k in zip(axes[0], ks):
        for label in labels:
            points = [(row["size"], row["k"][str(k)]["p50_ms"]) for row in rows
                      if shown_label(row) == label and str(k) in row.get("k", {})]
            if points:
                colour, style = styles[label]
                axis.plot(*zip(*points), marker="o", label=label, color=colour, linestyle=style)
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_xlabel("documents")
        axis.set_ylabel("p50 ms per query (1 thread)")
        axis.set_title(f"k={k}")
        axis.grid(True, which="both", alpha=0.3)
    handles, names = axes[0][0].get_legend_handles_labels()
    # below the panels, so no engine's line is hidden behind it
    figure.legend(handles, names, loc="lower center", ncol=columns, fontsize=8, frameon=False)
    figure.suptitle(title, fontsize=9)
    figure.tight_layout(rect=(0, 0.05 * rows_of_legend * 4.5 / (4.5 + 0.22 * rows_of_legend) / 0.9, 1, 1))
    figure.savefig(path, dpi=110, bbox_inches="tight")  # a legend wider than the panels is kept whole
    plt.close(figure)


def table(rows: list[dict], ks: list[int]) -> str:
    """The rows as text: latencies in milliseconds per query (one thread), recall against the reference."""
    header = ["engine", "size", "build s", "MiB", "RSS MiB"] + \
        [f"{c}@{k}" for k in ks for c in ("p50 ms", "p99 ms", "R")] + ["nDCG@10", "MRR@10"]
    lines = [" | ".join(header)]
    for row in rows:
        if "stopped" in row:
            lines.append(f"{shown_label(row)} | {row['size']:,} | stopped: {row['stopped']}")
            continue
        cells = [shown_label(row), f"{row['size']:,}", f"{row['build_seconds']:.1f}", f"{row['bytes'] / 2**20:.1f}",
                 f"{row['resident_bytes'] / 2**20:.0f}"]
        for k in ks:
            figures = row["k"][str(k)]
            cells += [f"{figures['p50_ms']:.2f}", f"{figures['p99_ms']:.2f}", f"{figures.get('recall', float('nan')):.4f}"]
        cells += [f"{row[m]:.4f}" if isinstance(row.get(m), float) else "-" for m in ("ndcg_cut_10", "mrr_10")]
        lines.append(" | ".join(cells))
    if any(row.get("end_to_end") for row in rows):
        lines.append(END_TO_END_NOTE)
    if any(isinstance(row.get("ndcg_cut_10"), float) for row in rows):
        lines.append(PREFIX_NOTE)
    return "\n".join(lines)


