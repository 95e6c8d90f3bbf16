"""Prose first: folded code cells say what they compute, and text outputs fit a phone.

Loaded through ``sphinx.local_extensions`` in _config.yml.

- A code cell tagged ``hide-input`` is folded by myst-nb under a toggle that says "Show code
  cell source". Its first line is a comment that summarises the cell (``# Figure 7.2: time
  against n``); a post-transform, run just before myst-nb's ``HideInputCells`` wraps the input,
  puts that summary on the toggle instead, open or closed. A folded cell without such a line
  keeps the generic prompt, which the browser check (.ci/browser_check/prose.py) fails.
- A folded output (cell tag ``hide-output``, for a long listing) says on its toggle how many
  lines it holds. A long output whose first line or last paragraph summarises it (cell tag
  ``output-summary-first`` or ``output-summary-last``) shows that summary, and folds the rest
  (or the whole output) under such a toggle.
- myst-nb's toggle carries ``aria-label="Toggle hidden content"``, which would hide the
  summary from a screen reader; the toggle is written again without it.
- Text outputs at a phone's width: one whose columns line up (``aligned``) keeps them and
  scrolls inside its box, with a shadow at the cut edge (``static/book-prose.css``); any
  other text output is marked ``book-wrap`` and wraps at the column's width.
"""

from __future__ import annotations

import re
from html import escape
from pathlib import Path

from docutils import nodes
from myst_nb.sphinx_ import HideCodeCellNode, HideInputCells
from sphinx.transforms.post_transforms import SphinxPostTransform

STATIC = Path(__file__).parent / "static"
FIRST_TAG, LAST_TAG = "tag_output-summary-first", "tag_output-summary-last"


def cell_summary(source: str) -> str | None:
    """The summary of a cell: its first line when that is a comment (``# ...``), without
    the ``#``; else None. A ``#!`` or ``#%%`` line is not a summary."""
    first = source.lstrip("\n").split("\n", 1)[0].strip()
    if not first.startswith("# "):
        return None
    text = first[2:].strip()
    return text or None


def aligned(text: str) -> bool:
    """Whether a text output holds columns that must stay aligned: two or more of its lines
    have a run of two spaces after their first word (a table, or rows printed to line up)."""
    return sum(bool(re.search(r"\S {2,}", line)) for line in text.splitlines()) >= 2


class SummaryPrompts(SphinxPostTransform):
    """Give each folded cell input its first-line comment as the toggle's text."""

    # Before myst-nb's HideInputCells, which copies the prompts onto the toggle it creates.
    default_priority = HideInputCells.default_priority - 1
    formats = ("html",)

    def run(self, **kwargs) -> None:
        for node in self.document.findall(nodes.container):
            if node.get("nb_element") != "cell_code" or node.get("hide_mode") not in (
                "input",
                "input+output",
            ):
                continue
            source = next(
                (
                    block.astext()
                    for block in node.findall(nodes.literal_block)
                    if block.parent.get("nb_element") == "cell_code_source"
                ),
                "",
            )
            summary = cell_summary(source)
            if summary:
                node["prompt_show"] = summary
                node["prompt_hide"] = summary


class OutputPrompts(SphinxPostTransform):
    """Say on a folded output's toggle how long the output is, instead of "Show code cell
    output"."""

    # After HideInputCells has wrapped the output in its toggle.
    default_priority = HideInputCells.default_priority + 1
    formats = ("html",)

    def run(self, **kwargs) -> None:
        for node in self.document.findall(HideCodeCellNode):
            if not {"below-input", "above-output"} & set(node["classes"]):
                continue
            lines = sum(
                len(block.astext().splitlines()) for block in node.findall(nodes.literal_block)
            )
            what = f"the full output ({lines} lines)" if lines > 1 else "the output"
            node["prompt_show"] = f"Show {what}"
            node["prompt_hide"] = f"Hide {what}"


def _block_like(block: nodes.literal_block, text: str) -> nodes.literal_block:
    """A literal block with ``block``'s attributes (classes, language) and ``text``."""
    new = nodes.literal_block(text, text)
    new.update_all_atts(block)
    return new


def _output_toggle(folded: nodes.Element, what: str) -> HideCodeCellNode:
    """A toggle, styled as myst-nb styles a folded output, holding ``folded``."""
    toggle = HideCodeCellNode(prompt_show=f"Show {what}", prompt_hide=f"Hide {what}")
    toggle["classes"] += ["below-input", "book-output-tail"]
    toggle += folded
    return toggle


class OutputSummaries(SphinxPostTransform):
    """A long text output shows its summary and folds the rest under a toggle that says how
    long it is. Cell tag ``output-summary-first``: the first line is the summary, the lines
    after it are folded. Cell tag ``output-summary-last``: the last paragraph (after the last
    blank line) is the summary, shown first, and the whole output is folded below it."""

    default_priority = HideInputCells.default_priority + 2
    formats = ("html",)

    def run(self, **kwargs) -> None:
        for cell in list(self.document.findall(nodes.container)):
            tags = {FIRST_TAG, LAST_TAG} & set(cell.get("classes", []))
            if cell.get("nb_element") != "cell_code" or not tags:
                continue
            output = next(
                (c for c in cell.children if c.get("nb_element") == "cell_code_output"), None
            )
            blocks = [] if output is None else list(output.findall(nodes.literal_block))
            if blocks and FIRST_TAG in tags:
                self._first(cell, blocks)
            elif blocks:
                self._last(cell, output, blocks)

    @staticmethod
    def _first(cell: nodes.Element, blocks: list[nodes.literal_block]) -> None:
        first = blocks[0]
        head, _, tail = first.astext().partition("\n")
        index = first.parent.index(first)
        rest = first.parent.children[index + 1 :]
        lines = len(tail.splitlines()) + sum(len(b.astext().splitlines()) for b in blocks[1:])
        folded = nodes.container(classes=["cell_output"], nb_element="cell_code_output")
        if tail.strip():
            folded += _block_like(first, tail)
        folded.extend(rest)
        first.parent.children = first.parent.children[:index] + [_block_like(first, head)]
        cell += _output_toggle(folded, f"the remaining {lines} lines")

    @staticmethod
    def _last(cell: nodes.Element, output: nodes.Element, blocks: list) -> None:
        text = "\n".join(b.astext().strip("\n") for b in blocks)
        summary = re.split(r"\n\s*\n", text.strip())[-1]
        shown = nodes.container(classes=["cell_output"], nb_element="cell_code_output")
        shown += _block_like(blocks[-1], summary)
        lines = len(text.strip().splitlines())
        cell.replace(output, [shown, _output_toggle(output, f"the full output ({lines} lines)")])


class WrapOutputs(SphinxPostTransform):
    """Mark each text output without aligned columns to wrap."""

    default_priority = 400
    formats = ("html",)

    def run(self, **kwargs) -> None:
        for node in self.document.findall(nodes.literal_block):
            classes = node.get("classes", [])
            if "output" in classes and not aligned(node.astext()):
                classes.append("book-wrap")


def _visit_toggle(self, node) -> None:
    classes = " ".join(node["classes"])
    self.body.append(f'<details class="admonition hide {classes}">\n<summary>\n')
    self.body.append(f'<p class="collapsed admonition-title">{escape(node["prompt_show"])}</p>\n')
    self.body.append(f'<p class="expanded admonition-title">{escape(node["prompt_hide"])}</p>\n')
    self.body.append("</summary>\n")


def _depart_toggle(self, node) -> None:
    self.body.append("</details>\n")


def _configure(app, config) -> None:
    if str(STATIC) not in map(str, config.html_static_path):
        config.html_static_path.append(str(STATIC))


def setup(app):
    app.connect("config-inited", _configure)
    app.add_post_transform(SummaryPrompts)
    app.add_post_transform(OutputPrompts)
    app.add_post_transform(OutputSummaries)
    app.add_post_transform(WrapOutputs)
    app.add_node(HideCodeCellNode, override=True, html=(_visit_toggle, _depart_toggle))
    app.add_css_file("book-prose.css")
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
