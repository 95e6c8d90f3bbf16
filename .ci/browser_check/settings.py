"""What the browser check holds a page to: budgets, widths, and the patterns it looks for."""

from __future__ import annotations

import re

# Hosts a page may try to reach without failing the check, with the reason. The request is
# still blocked and listed in the summary. Keep this empty unless a reader loses nothing.
ALLOWED_REMOTE_HOSTS: dict[str, str] = {}

# Resource types whose remote loading would make the offline book incomplete.
ESSENTIAL_TYPES = {"script", "stylesheet", "font", "image", "media"}
# URLs the browser may load; every other request (a remote host) is aborted.
LOCAL_SCHEMES = ("file:", "data:", "blob:", "about:")

# The text/plain fallback ipywidgets prints when no widget state was stored.
WIDGET_AS_TEXT = re.compile(
    r"^\s*(interactive|[A-Z]\w*(Slider|Box|Button|Dropdown|Output|Checkbox|Text|Tab|Accordion"
    r"|Select|Play|Label|HTML))\((children|value|description|layout|options)=",
    re.MULTILINE,
)

# What a reader's page may cost: every file the page loads, uncompressed, shared JavaScript
# included, at desktop width with every lazy image loaded (the most a reader's page loads: a
# phone loads the smaller phone forms); and the time from navigation until math is typeset,
# widgets drawn and images loaded. 3 MB until the figures became 2x rasters (sharp on dense
# screens), which doubled their bytes: the chapters with most figures load 3.0-3.7 MB. Serving
# 1x rasters to 1x screens (srcset) would bring them back under 3 MB; until then the budget is
# 4 MB, and the check's budget table prints each page's weight.
BUDGET_BYTES = 4_000_000
BUDGET_SECONDS = 3.0
READY_TRIES = 3
# Widths checked for layout and navigation: phone, tablet, desktop. The main load is at the last.
WIDTHS = (390, 768, 1400)
HEIGHTS = {390: 844, 768: 1024, 1400: 900}
# Widths at which each live figure is moved: phone and desktop.
LIVE_WIDTHS = (390, 1400)
# pydata-sphinx-theme shows the primary sidebar beside the article from this width up.
DESKTOP_WIDTH = 992

# An alt text that is empty, a file name or a hash says nothing about the figure.
TRIVIAL_ALT = re.compile(
    r"^\s*$|\.(png|jpe?g|svg|gif|webp)\s*$|^[0-9a-f]{16,}$|^(image|figure|img)$", re.I
)
# Raw TeX a reader must never see in the PDF or a search snippet.
RAW_TEX = re.compile(r"\\\(|\\\)|\\\[|\\\]|\$\$|\\begin\{|\\frac\{|\\mathcal\{|\\left[(\[]")
# A value as a reader would not write it: a float's rounding residue.
UGLY_NUMBER = re.compile(r"\d\.\d*(0000|9999)\d")
# A figure's caption number: "Figure 3.2" on a chapter, "Figure 2" on the unnumbered preface.
FIGURE_NUMBER = re.compile(r"^Figure (?:(\d+)\.)?(\d+)$")

PDF_NAME = "downloads/fine-grained-complexity-of-training-attention.pdf"
SKIP_SCHEMES = ("http:", "https:", "mailto:", "javascript:", "data:", "tel:", "ftp:")
SKIP_DIRS = {"_static", "_sources", "_images", "_sphinx_design_static"}
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
