"""Notebook outputs that share one copy of plotly.js, as Plotly's own ``init_notebook_mode(connected=False)``.

The first output of a kernel session (or ``av.init_notebook()``) carries a script that defines
``window.Plotly`` in the notebook's page and then announces it (``PLOTLY_READY``). Every output is plain
HTML in that page (no frame) whose script draws at once if ``window.Plotly`` is there, else when the
announcement comes: an output whose script runs first (moved above that one) still draws. A saved
notebook opened (trusted) elsewhere runs its outputs' scripts again, so it draws offline there too.
Colab shows each output in a page of its own: there every output carries plotly.js.

Each output's element ids and CSS start with a prefix of its own (``av-<random hex>-``), so two outputs
on one page never clash; user text reaches the page as escaped text or as JSON that cannot close its script.
"""

from __future__ import annotations

import html
import json
import secrets
import sys
from collections.abc import Sequence

import plotly.graph_objects as go
import plotly.io as pio

from ..core.names import Group
from ..core.result import AttentionResult
from .export import CONFIG
from .offline import PLOTLY_READY, heads_body, heads_script, plotly_js, script_safe, style

# Draws an output's figures (the JSON in its #<prefix>figures-data) once window.Plotly is defined.
_DRAW_FIGURES = """(function (prefix, ready) {
  const data = JSON.parse(document.getElementById(prefix + "figures-data").textContent);
  const draw = () => data.figures.forEach((figure, i) =>
    Plotly.newPlot(prefix + "figure-" + i, figure.data, figure.layout, data.config));
  if (window.Plotly) draw(); else window.addEventListener(ready, draw, { once: true });
})"""


def plotly_loader() -> str:
    """The script that defines ``window.Plotly`` in the page (once: a page that has it keeps it) and
    then fires ``PLOTLY_READY``. Classic Jupyter puts require.js's ``define`` on the page and a page
    may have a CommonJS ``module``: both are shadowed, so the bundle takes its plain-script path and
    sets ``window.Plotly`` whatever the page loaded before."""
    return (
        "<script>if (!window.Plotly) (function (define, module, exports) {\n"
        f"{plotly_js()}\n}})();\nwindow.dispatchEvent(new Event({json.dumps(PLOTLY_READY)}));</script>\n"
    )


class Session:
    """What this kernel has sent to its notebook's page: plotly.js goes with the first output only."""

    def __init__(self) -> None:
        self.sent_plotly = False

    def output(self, fragment: str) -> str:
        """``fragment`` as the next output, plotly.js ahead of it when the page may not have it yet."""
        first = not self.sent_plotly or "google.colab" in sys.modules  # Colab: one page per output
        self.sent_plotly = True
        return plotly_loader() + fragment if first else fragment

    def plotly(self) -> str:
        """plotly.js alone as the next output; the outputs after it go without."""
        self.sent_plotly = True
        return plotly_loader()


SESSION = Session()  # one per kernel: a kernel's outputs go to one notebook


def in_kernel() -> bool:
    """Whether this runs in a notebook's kernel (IPython with a kernel), not a script or a terminal."""
    shell = sys.modules.get("IPython") and sys.modules["IPython"].get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def draw_once_per_cell(shown) -> None:
    """Draw ``shown`` (an object with ``_repr_mimebundle_``) as an output of the running cell, unless it
    was drawn in this cell already. :func:`attention_viz.show` draws what it returns as it is called, so
    each of several calls in one cell shows; the cell's last value, the same object, is then not drawn
    twice (IPython calls ``_ipython_display_`` for it too). Shown again in a later cell, it draws again."""
    from IPython import get_ipython
    from IPython.display import display

    cell = getattr(get_ipython(), "execution_count", None)
    if getattr(shown, "_drawn_in_cell", None) == cell:
        return
    shown._drawn_in_cell = cell
    display(shown._repr_mimebundle_(), raw=True)


def new_prefix() -> str:
    return f"av-{secrets.token_hex(6)}-"


def figures_output(figures: Sequence[go.Figure], notes: Sequence[str] = (), extra_html: Sequence[str] = (),
                   heading: str = "") -> str:
    """Figures (and notes) as one output, in the order :func:`.offline.figures_html` lays them out;
    ``heading`` and ``notes`` are plain text (escaped), ``extra_html`` is markup built by this package."""
    p = new_prefix()
    parts = [f"<div id=\"{p}figures\" class=\"attention-viz\"><style>{style(f'#{p}figures', p)}</style>"]
    parts += [f"<h3>{html.escape(heading)}</h3>"] if heading else []
    parts += [f"<p class=\"note\">{html.escape(note)}</p>" for note in notes]
    for i, figure in enumerate(figures):
        height = f"height:{int(figure.layout.height)}px;" if figure.layout.height else ""
        parts.append(f"<div id=\"{p}figure-{i}\" style=\"{height}width:100%\"></div>")
    parts.extend(extra_html)
    data = (f"{{\"config\":{json.dumps({**CONFIG, 'responsive': True})},\"figures\":["
            + ",".join(pio.to_json(figure, validate=False) for figure in figures) + "]}")
    parts.append(f"<script type=\"application/json\" id=\"{p}figures-data\">{script_safe(data)}</script>")
    parts.append(f"<script>{_DRAW_FIGURES}({json.dumps(p)}, {json.dumps(PLOTLY_READY)});</script></div>")
    return "\n".join(parts)


def heads_output(result: AttentionResult, start: tuple[Group, int, int | str] | None = None) -> str:
    """The heads view (every layer and head, switchable) as one output; focus it (a click) for the keys."""
    p = new_prefix()
    return (f"<div id=\"{p}heads\" class=\"attention-viz\" tabindex=\"0\"><style>{style(f'#{p}heads', p)}</style>\n"
            f"{heads_body(result, start, p)}\n<script>{heads_script(p)}</script></div>")
