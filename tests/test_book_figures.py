"""Figures of the online book (book/_ext/book_figures.py): each notebook figure's <img> gets its
1x size and data-text-px, and a figure with a phone form a <picture> that serves it on phones."""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _load_extension():
    spec = importlib.util.spec_from_file_location(
        "book_figures", ROOT / "book" / "_ext" / "book_figures.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


book_figures = _load_extension()
DESKTOP, PHONE = b"desktop png bytes", b"phone png bytes"
SHA = hashlib.sha256(DESKTOP).hexdigest()
PHONE_NAME = hashlib.sha256(PHONE).hexdigest() + ".png"
META = {
    "width": 900,
    "height": 400,
    "text_px": 25.0,
    "phone": {"png": base64.b64encode(PHONE).decode(), "width": 340, "height": 700, "text_px": 25},
}


def _notebook(tmp_path, outputs):
    cell = {"cell_type": "code", "source": "", "metadata": {}, "outputs": outputs}
    path = tmp_path / "ch.ipynb"
    path.write_text(json.dumps({"cells": [cell, {"cell_type": "markdown", "source": ""}]}))
    return path


def test_figure_outputs_are_found_by_the_sha256_of_their_png(tmp_path):
    png = base64.b64encode(DESKTOP).decode()
    outputs = [
        {
            "output_type": "display_data",
            "data": {"image/png": png},
            "metadata": {"image/png": META},
        },
        {"output_type": "display_data", "data": {"image/png": "AAAA"}, "metadata": {}},
        {"output_type": "stream", "text": "x"},
    ]
    found = book_figures.figure_outputs([_notebook(tmp_path, outputs), tmp_path / "missing.ipynb"])
    assert found == {SHA: META}


def test_a_figure_with_a_phone_form_becomes_a_picture(tmp_path):
    page = (
        '<p><a class="reference internal image-reference" '
        f'href="../_images/{SHA}.png"><img alt="A plot." src="../_images/{SHA}.png" '
        'style="width: 900px; height: 400px;" />\n</a>'
        '<img alt="Other." src="../_images/other.png" /></p>'
    )
    html, n = book_figures.rewrite_page(page, {SHA: META}, tmp_path, with_phone=True)
    assert n == 1 and (tmp_path / PHONE_NAME).read_bytes() == PHONE
    assert html == (
        '<p><picture class="book-figure"><source media="(max-width: 680px)" '
        f'srcset="../_images/{PHONE_NAME}" width="340" height="700" data-text-px="25" />'
        f'<img width="900" height="400" data-text-px="25" alt="A plot." '
        f'src="../_images/{SHA}.png" /></picture>'
        '<img alt="Other." src="../_images/other.png" /></p>'
    )
    again, n = book_figures.rewrite_page(html, {SHA: META}, tmp_path, with_phone=True)
    assert (again, n) == (html, 0)  # a page is rewritten once
    printed, n = book_figures.rewrite_page(page, {SHA: META}, tmp_path, with_phone=False)
    assert n == 1 and "<picture" not in printed and 'data-text-px="25"' in printed


def test_the_phone_form_is_served_where_the_desktop_text_would_be_too_small():
    # 25 image px at 2x is 12.5 CSS px: shrunk to a column under 900 * 9 / 12.5 = 648 px the
    # desktop form's text falls under 9 px
    assert book_figures.phone_breakpoint(META) == 648 + book_figures.COLUMN_PADDING_PX
    wide = {"width": 1400, "height": 300, "text_px": 25.0}  # under 1008 px: every tablet
    assert book_figures.phone_breakpoint(wide) == book_figures.DESKTOP_WIDTH - 1
    narrow = {"width": 400, "height": 300, "text_px": 25.0}  # every phone all the same
    assert book_figures.phone_breakpoint(narrow) == book_figures.PHONE_MAX_PX
    tiny_text = {"width": 300, "height": 300, "text_px": 16.0}  # 8 px even at full size
    assert book_figures.phone_breakpoint(tiny_text) == book_figures.DESKTOP_WIDTH - 1
