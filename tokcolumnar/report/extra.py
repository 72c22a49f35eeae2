"""The optional extra `tokcolumnar[report]` (Altair for the charts, vl-convert for the offline
JavaScript bundle and the PNGs): imported only by the modules that draw, so the rest of
tokcolumnar (and `compare --format json|csv`) works without it."""

from __future__ import annotations

from ..errors import TokcolumnarError

MISSING = ("charts need the 'report' extra (Altair and vl-convert): "
           "pip install 'tokcolumnar[report]'")

try:
    import altair as alt
    import vl_convert as vlc
except ImportError:
    raise TokcolumnarError(MISSING) from None

# the Vega-Lite version Altair writes ("6.4"): vl-convert must use the same JavaScript
VL_VERSION = ".".join(alt.SCHEMA_VERSION.lstrip("v").split(".")[:2])

__all__ = ["MISSING", "VL_VERSION", "alt", "vlc"]
