"""The whole-book PDF (``make pdf``): it is in the site, holds every chapter's title, and shows
no raw TeX. Read with pdftotext (Debian's poppler-utils)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from bs4 import BeautifulSoup

from .settings import PDF_NAME, RAW_TEX
from .static import words


def chapter_titles(root: Path, pages: list[Path]) -> list[str]:
    """The <h1> of every page of the book proper (book/*.html)."""
    titles = []
    for page in pages:
        if page.parent != root / "book":
            continue
        h1 = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser").find("h1")
        if h1:
            titles.append(h1.get_text(" ", strip=True).rstrip("#").strip())
    return titles


def check_pdf_text(text: str, titles: list[str]) -> list[str]:
    """Every title is in the PDF's text, and no raw TeX is (the first five shown)."""
    flat = words(text)
    fails = [f"chapter {title!r} is not in the PDF" for title in titles if words(title) not in flat]
    for m in list(RAW_TEX.finditer(text))[:5]:
        snippet = text[max(0, m.start() - 30) : m.end() + 30].replace("\n", " ")
        fails.append(f"raw TeX in the PDF: {snippet!r}")
    return fails


def check_pdf(root: Path, pages: list[Path]) -> tuple[list[str], int]:
    """The whole-book PDF is in the site, with every chapter and no raw TeX."""
    pdf = root / PDF_NAME
    if not pdf.is_file():
        return [f"{PDF_NAME} is missing from the site (`make pdf` builds it)"], 1
    if not shutil.which("pdftotext"):
        return ["pdftotext missing (Debian package poppler-utils)"], 1
    text = subprocess.run(
        ["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True, check=True
    ).stdout
    titles = chapter_titles(root, pages)
    fails = check_pdf_text(text, titles)
    found = len(titles) - sum("is not in the PDF" in f for f in fails)
    n_pages = text.count("\f")
    print(
        f"browser-check: pdf: {pdf.stat().st_size / 1e6:.1f} MB, {n_pages} pages, "
        f"{found} of {len(titles)} chapter titles found"
    )
    return fails, len(titles) + 1
