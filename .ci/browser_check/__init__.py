"""Open every page of the built book in headless Chromium and check what a reader would see.

Usage: ``python .ci/browser_check _build/html [--bib references.bib] [--screenshots DIR]
[--chromium PATH] [--lab-chapter NOTEBOOK]`` (``make browser-check``).

For each HTML page (the redirect ``index.html`` is only link-checked), it asserts:

- math: every ``.math`` element holds a MathJax ``mjx-container``, MathJax reported no TeX
  error (``mjx-merror``), and no raw ``\\(``, ``\\[``, ``$$`` or ``\\begin{`` is left in the
  page text outside code;
- images: every ``<img>`` finished loading with ``naturalWidth > 0``;
- widgets: every embedded widget view (``application/vnd.jupyter.widget-view+json``) was
  replaced by a visible rendered element, and no output shows a widget as plain text (a sign
  that the notebook was executed without ``store_widget_state``). The chapters embed no
  widget view any more (their figures are live figures, below); the check stays for any that
  comes back;
- live figures (``attnlib.widgets.live_figure``), at 390 and 1400 px: see live.py;
- a downloaded chapter in JupyterLab (jupyterlab.py): one notebook of ``downloads/notebooks.zip``
  (``--lab-chapter``) opened untrusted in ``jupyter lab``: its MyST rendered, its live figure's
  frame and note on trust shown, its first cell run without an error;
- local files: no request for a ``file://`` URL failed (a 404 in a served book);
- console: no JavaScript error or uncaught exception, apart from the errors that the blocked
  requests below cause;
- links: every internal ``href``/``src`` resolves to a file in the build, and every
  ``#fragment`` to an element id in its target page;
- downloads: a page built from a notebook links to its ``.ipynb``;
- favicon: every page links one;
- layout and navigation at phone, tablet and desktop width: nothing wider than the viewport,
  no display equation cut off, the navigation button opens the drawer (or hides and shows the
  sidebar), which lists every page of the book, and Escape closes it;
- budget: every page loads at most ``BUDGET_BYTES`` (every file, uncompressed) and is ready
  (math typeset, widgets drawn, first-screen images loaded) within ``BUDGET_SECONDS`` of
  navigation, the fastest of up to ``READY_TRIES`` cold loads;
- alt text: every image of the article has a real alt text (not empty, a file name or a hash),
  on every page; images drawn by a live ipywidgets widget are left to the widget check;
- figures: every image a code cell draws on a chapter page sits in a ``<figure>`` whose caption
  is numbered "Figure N.k", N the chapter's number (the unnumbered preface: "Figure k"), and k
  runs 1, 2, ... on each page; a live figure is numbered like a static one;
- glossary: every page built from a notebook links at least one glossary term, every term link
  points at a term of the glossary page, and no term is left unlinked (an unknown term);
- figure text (figures.py): at 390 px the smallest text of every figure image of a chapter, as
  shown (``data-text-px`` times displayed over natural width), is at least 9 px, and an image
  without ``data-text-px`` fails; at 1400 px the desktop form is shown, and a figure enlarges in
  a dialog that Escape, its close button and a tap outside close, focus returning to it;
- collapsed outputs: each output hidden behind a toggle (``hide-output``) opens when its
  toggle is clicked;
- prose first, on every page built from a notebook: unfolded code input at most 10% of the
  article's height at 1400 px, every folded cell input with a summary of its own on its toggle,
  and at 390 px no text output cut at the right edge without a scroll shadow: see prose.py;
- search: the snippets of a search show no raw TeX and no TeX command word ("mathcal");
- accessibility (a11y.py), at 1400 and 390 px: no axe-core violation (contrast, duplicate ids,
  the viewport tag, focus and WCAG 2 A/AA rules), a live figure's first control at most 30
  presses of Tab from page load, a focus ring on every header and navigation control, one
  viewport tag, a plain-text description and OpenGraph tags, unique ids;
- the whole-book PDF: it is in the site, holds every chapter's title, and shows no raw TeX;
- bibliography (with ``--bib references.bib``): every entry of the .bib file is listed on the
  bibliography page, i.e. it is cited somewhere in the book.

The browser reaches nothing but ``file://``: every request to a remote host is aborted and
listed. A remote *script, style sheet, font or image* is a failure (the book must be a
self-contained folder) unless its host is in ``ALLOWED_REMOTE_HOSTS`` with a reason.

A full-page screenshot of every page goes to ``_build/screenshots/`` (next to ``html/``).
Exit status 1 on any failure, with one line per failed check, naming the page.

The modules: settings.py (budgets, widths, patterns); static.py (checks of the HTML on disk)
and observed.py (checks of what the browser saw), both pure functions that return problems;
browser.py and nav.py (Playwright driving of a page); live.py, toggles.py, search.py and
pdf.py (one check each, driving and judging); report.py (what is printed); cli.py (the
command line). The JavaScript run in the pages is in js/, one function a file.
"""
