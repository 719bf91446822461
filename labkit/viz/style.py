"""One style for every figure and widget: the palette (a colour means the same thing everywhere) and small
text helpers. Figure builders return ``plotly.graph_objects.Figure`` sized to fit a notebook column and never
show it; widgets get plain Python lists."""
from __future__ import annotations

import re

__all__ = ["PALETTE", "MODEL_COLORS", "FIGURE_WIDTH", "rgba", "visible", "token_labels"]

PALETTE = {
    # what happened to a token (timeline, replayer, token comparison)
    "accepted": "#2ca25f",        # green: the target agreed with the draft
    "rejected": "#de2d26",        # red: the first drafted token the target disagreed with
    "discarded": "#d4d4d4",       # grey: drafted after a rejection, thrown away
    "replacement": "#2166ac",     # dark blue: the target's own token in place of the rejected one
    "bonus": "#92c5de",           # light blue: the target's extra token after a fully accepted draft
    "verify": "#bdbdbd",          # a verify pass that emitted no token of its own (accepted EOS)
    "prefill": "#efefef",         # the full model reading the prompt
    "threshold": "#7f3b08",       # brown: a draft policy's threshold
    # the blocks of a forward
    "attention": "#1f78b4", "mlp": "#ff7f00", "layer_overhead": "#b2b2b2", "fixed": "#6a3d9a",
    "kept": "#dbe9f6", "skipped": "#d95f02", "no_self_draft": "#e6e6e6",
    # prompt sources (notebook 07): the text the models trained on, text they never saw, a user's file
    "source_stdlib": "#1b9e77", "source_packages": "#7570b3", "source_file": "#e7298a",
    # optimisers
    "gp": "#1f77b4", "tpe": "#2ca02c", "random": "#7f7f7f", "EI": "#1f77b4", "LCB": "#ff7f0e", "next": "#d62728",
    # metrics and markers
    "acceptance": "#1f77b4", "tokens_per_step": "#2ca02c", "speedup": "#9467bd", "auxiliary": "#7f7f7f",
    "analytic": "#222222", "current": "#d62728", "live": "#ff7f0e",
    # speculative sampling: the two distributions and what is left of p after the draft (notebook 05)
    "target": "#2166ac", "draft": "#e08214", "residual": "#762a83",
    # a slot of a Jacobi iteration (notebook 06): proven in an earlier iteration / proven now / changed / unchanged
    "final": "#d9d9d9", "fixed_now": "#2ca25f", "changed": "#de2d26", "unchanged": "#c7e9c0",
    "noise": "#e6ab02",           # gold: cells the noise cannot tell apart from the best
    # kinds of decoding method
    "baseline": "#9e9e9e", "labkit": "#2e7d32", "transformers": "#1565c0",
    # families of drafters (notebook 08)
    "plain": "#9e9e9e", "layer skip": "#2e7d32", "early exit": "#6a3d9a", "separate model": "#b15928",
    "prompt lookup": "#1f78b4", "combination": "#e7298a",
    # where a forward's time goes (early exit, ours vs transformers')
    "full forward": "#bdbdbd", "early layers": "#9e9ac8", "late layers": "#54278f", "outside model": "#fdae6b",
}
#: Line colours of models (or runs) compared side by side: first, second, ...
MODEL_COLORS = ("#1b9e77", "#d95f02", "#7570b3", "#e7298a")
#: Width (px) for figures that need a fixed one (widgets; text fitted to bars): JupyterLab's output column beside
#: the file browser in a 1280-px window is 848 px. Static figures leave ``width`` unset and fill the column.
FIGURE_WIDTH = 820

_VISIBLE = {" ": "␣", "\n": "⏎", "\t": "⇥", "\r": "␍"}


def rgba(hex_color: str, alpha: float) -> str:
    r, g, b = (int(hex_color[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


def visible(text: str, compact: bool = True) -> str:
    """Whitespace made visible: ' ' -> '␣', newline -> '⏎', tab -> '⇥'; ``compact`` shortens runs of 4+ spaces
    to '␣×N'. An empty string (a token that decodes to nothing on its own) becomes '∅'."""
    if text == "":
        return "∅"
    out = "".join(_VISIBLE.get(c, c) for c in text)
    if compact:
        out = re.sub("␣{4,}", lambda m: f"␣×{len(m.group(0))}", out)
    return out


def token_labels(tokenizer, token_ids, compact: bool = True) -> dict[int, str]:
    """{token id: visible text} decoded one token at a time with ``tokenizer.decode([id])``."""
    return {t: visible(tokenizer.decode([t]), compact) if t >= 0 else "∅" for t in set(int(t) for t in token_ids)}
