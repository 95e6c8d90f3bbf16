"""Live figures that load only the frames a reader looks at.

Loaded through ``sphinx.local_extensions`` in _config.yml.

A live figure (``attnlib.widgets.live_figure``) stores every frame of its grid in the
notebook's output, inline as ``data:`` PNGs: the starting frame at the book's resolution in
its wide and phone forms, every other one as a light draft, so that the notebook works on its
own (in JupyterLab, from a download) and a chapter runs in seconds, not minutes. After an HTML
build this extension

1. draws every draft again in both forms at the book's resolution, from the point and the
   drawing function the page names (``attnlib.widgets.render_frame``'s bytes, which the
   browser check recomputes), on every core, keeping each frame in ``_build/.live-frames/``
   under a key of its call and of attnlib's source, so that the next build draws only what
   changed; and recomputes the width below which the page serves the phone form;
2. writes each inline frame into ``_images/``, named by the sha256 of its bytes as myst-nb
   names the images it writes, and points the figure at the file: its ``<img>`` and
   ``<source>`` (the starting frame, loaded with the page) and the frame list its script
   reads, so that any other frame is loaded only when a control shows it.
"""

from __future__ import annotations

import base64
import concurrent.futures
import functools
import hashlib
import html
import json
import multiprocessing
import os
import re
from pathlib import Path

from sphinx.util import logging

logger = logging.getLogger(__name__)

#: A live figure's HTML, as ``attnlib.widgets.live_figure`` writes it: the block ends with
#: its swap script (the frame data's script is followed by that script, not by ``</div>``).
FIGURE = re.compile(r'<div class="live-figure" .*?</script></div>', re.S)
FRAME = re.compile(r"data:image/png;base64,([A-Za-z0-9+/]+=*)")
DATA = re.compile(
    r'(<script type="application/json" class="live-figure-data">)(.*?)(</script>)', re.S
)
DRAW = re.compile(r'data-draw="([^"]*)"')
MEDIA = re.compile(r'(<source media="\(max-width: )\d+(px\)")')


@functools.cache
def _source_key() -> str:
    """A digest of attnlib's source and of the drawing libraries' versions: a cached frame is
    used again only if nothing that draws it has changed."""
    import matplotlib
    import PIL

    import attnlib

    digest = hashlib.sha256(f"{matplotlib.__version__} {PIL.__version__}".encode())
    for path in sorted(Path(attnlib.__file__).parent.rglob("*.py")):
        digest.update(path.as_posix().encode() + path.read_bytes())
    return digest.hexdigest()


def draw_frames(jobs: list[tuple], cache: Path | None) -> list[tuple[bytes, float]]:
    """The frames of ``jobs`` (each ``(spec, point, form)``), from ``cache`` when drawn before,
    else drawn on every core (and kept in ``cache``)."""
    keys = [
        hashlib.sha256(json.dumps([_source_key(), *job], sort_keys=True).encode()).hexdigest()
        for job in jobs
    ]
    done: dict[int, tuple[bytes, float]] = {}
    for i, key in enumerate(keys):
        if cache is not None and (cache / f"{key}.json").is_file():
            done[i] = (
                (cache / f"{key}.png").read_bytes(),
                json.loads((cache / f"{key}.json").read_text())["text_px"],
            )
    todo = [i for i in range(len(jobs)) if i not in done]
    if todo:
        from attnlib.widgets.frames import _render_spec

        # fork: the workers start with attnlib already imported, and Sphinx's state is not needed
        with concurrent.futures.ProcessPoolExecutor(
            max_workers=min(len(todo), os.cpu_count() or 1),
            mp_context=multiprocessing.get_context("fork"),
        ) as pool:
            for i, drawn in zip(todo, pool.map(_render_spec, [jobs[i] for i in todo]), strict=True):
                done[i] = drawn
                if cache is not None:
                    cache.mkdir(parents=True, exist_ok=True)
                    (cache / f"{keys[i]}.png").write_bytes(drawn[0])
                    (cache / f"{keys[i]}.json").write_text(json.dumps({"text_px": drawn[1]}))
    return [done[i] for i in range(len(jobs))]


def draw_drafts(block: str, cache: Path | None) -> str:
    """``block`` (one live figure's HTML) with every draft frame drawn again in the starting
    frame's forms at the book's resolution, and the phone form's breakpoint recomputed."""
    from attnlib.widgets import live

    found = DATA.search(block)
    data = json.loads(found[2])
    drafts = [f for f in data["frames"] if f.get("draft")]
    if not drafts:
        return block
    spec = html.unescape(DRAW.search(block)[1])
    forms = ["wide", "phone"] if any("phone" in f for f in data["frames"]) else ["wide"]
    drawn = iter(draw_frames([(spec, f["point"], form) for f in drafts for form in forms], cache))
    for f in drafts:
        del f["draft"]
        f.update(live._frame_entry(*next(drawn)))
        if "phone" in forms:
            f["phone"] = live._frame_entry(*next(drawn))
    block = block[: found.start(2)] + live._json(data) + block[found.end(2) :]
    if "phone" in forms:
        width = live.phone_breakpoint(data["frames"])
        block = MEDIA.sub(lambda m: f"{m[1]}{width}{m[2]}", block)
    return block


def externalize(block: str, images: Path, prefix: str) -> tuple[str, int]:
    """``block`` (one live figure's HTML) with every inline PNG written into ``images`` and
    replaced by ``prefix`` + its file name. Returns the block and how many frames it wrote
    (a frame shown twice, in the ``<img>`` and in the frame list, is written once)."""
    written: set[str] = set()

    def one(match) -> str:
        data = base64.b64decode(match[1])
        name = f"{hashlib.sha256(data).hexdigest()}.png"
        target = images / name
        if not target.is_file():
            target.write_bytes(data)
        written.add(name)
        return prefix + name

    return FRAME.sub(one, block), len(written)


def rewrite_page(
    text: str, images: Path, prefix: str, cache: Path | None = None
) -> tuple[str, int, int]:
    """``text`` (a page's HTML) with the drafts of its live figures drawn (:func:`draw_drafts`,
    kept in ``cache``) and every frame in a file under ``images`` (``prefix`` is the page's
    relative URL of that folder, ending in ``/``). Returns the page, its number of live figures
    and of frame files."""
    figures = frames = 0

    def one(match) -> str:
        nonlocal figures, frames
        block, n = externalize(draw_drafts(match[0], cache), images, prefix)
        figures, frames = figures + 1, frames + n
        return block

    return FIGURE.sub(one, text), figures, frames


def _rewrite(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    out = Path(app.outdir)
    images = out / "_images"
    images.mkdir(exist_ok=True)
    figures = frames = 0
    for page in out.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        if 'data-live-figure="' not in text:
            continue
        prefix = Path(os.path.relpath(images, page.parent)).as_posix() + "/"
        new, n, m = rewrite_page(text, images, prefix, out.parent / ".live-frames")
        if n:
            page.write_text(new, encoding="utf-8")
            figures, frames = figures + n, frames + m
    logger.info("book_live: %d live figures, %d frames written to _images/", figures, frames)


def setup(app):
    app.connect("build-finished", _rewrite)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
