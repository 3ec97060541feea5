"""bench's output: the table it prints and the plot of p50 latency against size (log-log, one panel per depth)."""
from __future__ import annotations


def plot(rows: list[dict], ks: list[int], path: str, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = list(dict.fromkeys(row["engine"] for row in rows))
    rows_of_legend = (len(labels) + 1) // 2
    figure, axes = plt.subplots(1, len(ks), figsize=(6 * len(ks), 4.5 + 0.22 * rows_of_legend), squeeze=False)
    colours = plt.get_cmap("tab20").colors  # one colour per engine beyond the default cycle's ten
    styles = ("-", "--", ":", "-.")
    for axis, k in zip(axes[0], ks):
        for number, label in enumerate(labels):
            points = [(row["size"], row["k"][str(k)]["p50_ms"]) for row in rows
                      if row["engine"] == label and str(k) in row.get("k", {})]
            if points:
                axis.plot(*zip(*points), marker="o", label=label, color=colours[number % len(colours)],
                          linestyle=styles[(number // len(colours)) % len(styles)])
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_xlabel("documents")
        axis.set_ylabel("p50 ms per query (1 thread)")
        axis.set_title(f"k={k}")
        axis.grid(True, which="both", alpha=0.3)
    handles, names = axes[0][0].get_legend_handles_labels()
    # below the panels, so no engine's line is hidden behind it
    figure.legend(handles, names, loc="lower center", ncol=2, fontsize=8, frameon=False)
    figure.suptitle(title, fontsize=9)
    figure.tight_layout(rect=(0, 0.05 * rows_of_legend * 4.5 / (4.5 + 0.22 * rows_of_legend) / 0.9, 1, 1))
    figure.savefig(path, dpi=110)
    plt.close(figure)


def table(rows: list[dict], ks: list[int]) -> str:
    header = ["engine", "size", "build s", "MiB", "RSS MiB"] + [f"{c}@{k}" for k in ks for c in ("p50", "p99", "R")] \
        + ["nDCG@10", "MRR@10"]
    lines = [" | ".join(header)]
    for row in rows:
        if "stopped" in row:
            lines.append(f"{row['engine']} | {row['size']:,} | stopped: {row['stopped']}")
            continue
        cells = [row["engine"], f"{row['size']:,}", f"{row['build_seconds']:.1f}", f"{row['bytes'] / 2**20:.1f}",
                 f"{row['resident_bytes'] / 2**20:.0f}"]
        for k in ks:
            figures = row["k"][str(k)]
            cells += [f"{figures['p50_ms']:.2f}", f"{figures['p99_ms']:.2f}", f"{figures.get('recall', float('nan')):.4f}"]
        cells += [f"{row[m]:.4f}" if isinstance(row.get(m), float) else "-" for m in ("ndcg_cut_10", "mrr_10")]
        lines.append(" | ".join(cells))
    return "\n".join(lines)


