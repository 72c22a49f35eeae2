"""The charts of `report` and `compare`, as Vega-Lite specs built with Altair from Polars
frames. Every frame is aggregated in Polars first (a few hundred rows at most), so the specs
stay small and Altair's 5,000-row limit is never reached."""

from __future__ import annotations

from typing import Any

import polars as pl

from .extra import alt

Spec = dict[str, Any]

# the metrics drawn per file (the table has them all)
CHART_METRICS = ["bytes_per_token", "chars_per_token", "fertility", "split_word_share",
                 "vocab_utilization", "renyi_efficiency"]
CURVE_POINTS = 400  # points per file of the bytes-per-token curve
RANK_BUCKETS = 500  # points of the merge-count curve
RANK_BLOCKS = 40  # bars of the tokens-entering chart


def merge_count(merges: pl.DataFrame) -> Spec:
    """The pair count of each merge when it was chosen, by rank (log scale): a min-max band and
    the mean over buckets of ranks."""
    step = max(1, -(-merges.height // RANK_BUCKETS))
    mc = (merges.filter(pl.col("count") > 0)
          .group_by((pl.col("rank") // step * step).alias("rank"))
          .agg(pl.col("count").min().alias("min"), pl.col("count").max().alias("max"),
               pl.col("count").mean().alias("mean")).sort("rank"))
    base = alt.Chart(mc).encode(x=alt.X("rank:Q", title="merge rank"))
    band = base.mark_area(opacity=0.3).encode(
        y=alt.Y("min:Q", scale=alt.Scale(type="log"), title="pair count when merged"), y2="max:Q")
    line = base.mark_line().encode(y="mean:Q", tooltip=["rank", "min", "max", "mean"])
    return (band + line).properties(title="Merge count by rank", width=520,
                                    height=260).to_dict()


def entering(merges: pl.DataFrame, vocab: pl.DataFrame) -> Spec:
    """New tokens per block of ranks, stacked by script."""
    block = max(1, -(-merges.height // RANK_BLOCKS))
    ent = (merges.select("rank", pl.col("id").cast(pl.Int64))
           .join(vocab.select("id", "script"), on="id", how="left")
           .group_by((pl.col("rank") // block * block).alias("from_rank"), "script")
           .agg(pl.len().alias("tokens")).sort("from_rank", "script"))
    return alt.Chart(ent).mark_bar().encode(
        x=alt.X("from_rank:O", title=f"first rank of the block ({block} merges)",
                axis=alt.Axis(labelOverlap=True)),
        y=alt.Y("tokens:Q", title="new tokens"), color=alt.Color("script:N"),
        tooltip=["from_rank", "script", "tokens"]).properties(
        title="Tokens entering the vocabulary per rank block", width=520, height=260).to_dict()


def token_lengths(vocab: pl.DataFrame) -> Spec:
    """Histogram of token lengths in characters and in UTF-8 bytes."""
    parts = [vocab.drop_nulls(col).group_by(pl.col(col).alias("length"))
             .agg(pl.len().alias("tokens")).with_columns(pl.lit(unit).alias("unit"))
             for col, unit in (("chars", "characters"), ("bytes", "UTF-8 bytes"))]
    lens = pl.concat(parts).sort("unit", "length")
    return alt.Chart(lens).mark_bar().encode(
        x=alt.X("length:O", title="token length", axis=alt.Axis(labelOverlap=True)),
        y=alt.Y("tokens:Q"), tooltip=["unit", "length", "tokens"],
        column=alt.Column("unit:N", title=None)).properties(
        title="Token length", width=250, height=220).to_dict()


def scripts(vocab: pl.DataFrame) -> Spec:
    """Share of the vocabulary per Unicode script."""
    sc = vocab.group_by("script").agg(pl.len().alias("tokens")).with_columns(
        (pl.col("tokens") / pl.col("tokens").sum()).alias("share")).sort("script")
    return alt.Chart(sc).mark_bar().encode(
        y=alt.Y("script:N", sort="-x", title=None),
        x=alt.X("share:Q", axis=alt.Axis(format="%"), title="share of the vocabulary"),
        tooltip=["script", "tokens", alt.Tooltip("share:Q", format=".2%")]).properties(
        title="Vocabulary share per Unicode script", width=520, height=220).to_dict()


def prefix_curve(curve: pl.DataFrame) -> Spec:
    """Bytes per token against vocabulary size (the first k merges), one line per file, thinned
    to about CURVE_POINTS points per file (the last one always kept); a short curve (WordPiece's
    grid) shows its points."""
    row = pl.int_range(pl.len()).over("file")
    step = max(1, -(-int(curve.group_by("file").len().get_column("len").max()) // CURVE_POINTS))
    cv = curve.filter((row % step == 0) | (row == pl.len().over("file") - 1))
    few = cv.group_by("file").len().get_column("len").max() <= 40
    return alt.Chart(cv).mark_line(point=bool(few)).encode(
        x=alt.X("vocab_size:Q", title="vocabulary size (the first k merges)"),
        y=alt.Y("bytes_per_token:Q", title="bytes per token"), color=alt.Color("file:N"),
        tooltip=["file", "k", "vocab_size", alt.Tooltip("bytes_per_token:Q", format=".3f")]
    ).properties(title="Bytes per token by vocabulary size", width=520, height=260).to_dict()


def metrics_panels(metrics: pl.DataFrame, by: str = "file") -> Spec:
    """One small bar chart per metric (independent scales), a bar per file (or tokenizer x
    file in `compare`)."""
    index = [c for c in ("tokenizer", "file") if c in metrics.columns]
    long = metrics.unpivot(index=index, on=CHART_METRICS, variable_name="metric").drop_nans(
        "value")
    enc: dict[str, Any] = {
        "x": alt.X("file:N", title=None, axis=alt.Axis(labelAngle=-40, labelLimit=120)),
        "y": alt.Y("value:Q", title=None), "color": alt.Color(f"{by}:N"),
        "tooltip": [*index, "metric", alt.Tooltip("value:Q", format=".4f")]}
    if by != "file":
        enc["xOffset"] = alt.XOffset(f"{by}:N")
    return alt.Chart(long).mark_bar().encode(**enc).properties(width=220, height=150).facet(
        facet=alt.Facet("metric:N", title=None), columns=3).resolve_scale(
        y="independent").properties(title="Metrics per file").to_dict()


def parity(metrics: pl.DataFrame, files: list[str], reference: str) -> Spec:
    """Tokens for the same content relative to the first file, per tokenizer."""
    return alt.Chart(metrics.drop_nans("parity")).mark_bar().encode(
        x=alt.X("file:N", title=None, sort=files, axis=alt.Axis(labelAngle=-40)),
        xOffset="tokenizer:N", y=alt.Y("parity:Q", title=f"tokens relative to {reference}"),
        color="tokenizer:N",
        tooltip=["tokenizer", "file", alt.Tooltip("parity:Q", format=".3f")]).properties(
        title="Parity across files (parallel text)", width=700, height=260).to_dict()
