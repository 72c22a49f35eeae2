"""One self-contained HTML page (opens offline, no CDN) holding several Vega-Lite charts and
tables, and the charts as PNG files. The Vega + Vega-Lite + vega-embed bundle is inlined once;
vl-convert builds it in about 5 s, so it is cached on disk per vl-convert and Vega-Lite
version."""

from __future__ import annotations

import html
import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

import polars as pl

from ..outputs import mark_file, output_file
from .charts import Spec
from .extra import VL_VERSION, vlc


def bundle_cache_path() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tokcolumnar" / f"vega-bundle-{vlc.__version__}-{VL_VERSION}.js"


def js_bundle() -> str:
    """The JavaScript that defines `vegaEmbed`: from the cache, else built and cached (written
    atomically; a cache that cannot be written is skipped)."""
    path = bundle_cache_path()
    try:
        text = path.read_text(encoding="utf-8")
        if "vegaEmbed" in text:
            return text
    except OSError:
        pass
    text = vlc.javascript_bundle(vl_version=VL_VERSION)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".vega-bundle-", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError:
        pass
    return text


def _cell(v: object) -> str:
    if isinstance(v, float):
        return f"<td>{v:.4f}</td>" if v == v else "<td>–</td>"
    if isinstance(v, int):
        return f"<td>{v:,}</td>"
    return f"<td>{html.escape('' if v is None else str(v))}</td>"


def table_html(df: pl.DataFrame) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in df.columns)
    body = "".join("<tr>" + "".join(_cell(v) for v in row) + "</tr>" for row in df.iter_rows())
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


STYLE = """body{font-family:sans-serif;margin:2em;max-width:1250px;color:#222}
table{border-collapse:collapse;font-size:13px;margin-bottom:1em}
td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}th{background:#f3f3f3}
td:first-child,th:first-child{text-align:left}
.warning{background:#fff3cd;border:1px solid #e0c36c;padding:.5em 1em;margin:.5em 0}
.note{color:#555;font-size:13px}figure{margin:1.5em 0}"""


def page(title: str, specs: dict[str, Spec], tables: Iterable[tuple[str, str]],
         warnings: Iterable[str] = (), notes: Iterable[str] = ()) -> str:
    """The page: warnings, the charts (one `vegaEmbed` each, so a broken chart does not blank
    the others), then the tables. When every chart has rendered the body gets
    `data-charts-rendered=N`; a failure sets `data-charts-error` and logs a console error."""
    figs = "\n".join(f'<figure><div class="chart" id="chart-{k}"></div></figure>'
                     for k in specs)
    warn = "\n".join(f'<p class="warning">{html.escape(w)}</p>' for w in warnings)
    note = "\n".join(f'<p class="note">{html.escape(n)}</p>' for n in notes)
    tabs = "\n".join(f"<h2>{html.escape(h)}</h2>\n{t}" for h, t in tables)
    # JSON inside <script>: "</" must not appear literally
    data = json.dumps(specs).replace("</", "<\\/")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>{STYLE}</style>
<script>{js_bundle()}</script></head>
<body><h1>{html.escape(title)}</h1>
{warn}
{figs}
{note}
{tabs}
<script>
const specs = {data};
const opts = {{renderer: "svg", actions: false}};
Promise.all(Object.entries(specs).map(([k, s]) => vegaEmbed("#chart-" + k, s, opts)))
  .then(r => {{ document.body.dataset.chartsRendered = String(r.length); }})
  .catch(e => {{ document.body.dataset.chartsError = String(e); console.error(e); }});
</script></body></html>
"""


def write_text_output(target: str, text: str, *, inputs: list[str], force: bool) -> None:
    """Write an output file by the safety rules (it replaces only what we wrote)."""
    with output_file(target, inputs=inputs, force=force) as tmp:
        tmp.write_text(text, encoding="utf-8")
        mark_file(tmp)


def write_pngs(specs: dict[str, Spec], directory: str, *, inputs: list[str],
               force: bool) -> list[Path]:
    """Each chart as `DIR/NAME.png` (scale 2), each file written by the safety rules."""
    out = []
    for name, spec in specs.items():
        target = Path(directory) / f"{name}.png"
        with output_file(target, inputs=inputs, force=force, what="--png") as tmp:
            tmp.write_bytes(vlc.vegalite_to_png(spec, vl_version=VL_VERSION, scale=2))
            mark_file(tmp)
        out.append(target)
    return out
