"""A downloaded chapter, opened in JupyterLab as a reader would open it: one notebook from the
site's ``downloads/notebooks.zip`` is unzipped into a temporary folder, ``jupyter lab`` (from
the Python running this check, whose environment holds the reader set) serves it on a free port
of 127.0.0.1 with a token, and headless Chromium opens it. The notebook is untrusted there, as
a download is: the server gets fresh Jupyter data and configuration folders.

What must hold: jupyterlab-myst renders the MyST markup (no role, directive or ``:label:``
option is left as text in a markdown cell, and at least one admonition or proof box is drawn);
every live figure shows its default frame and the note that its sliders work once the notebook
is trusted or the cell re-run; and the first code cell, run with Shift+Enter, executes without
an error and says that attnlib is installed. Three screenshots go to the screenshot folder.

Only this check reaches beyond ``file:``, and only to its own server; the server and its kernel
are stopped however the check ends. :func:`raw_myst`, :func:`check_seen` and
:func:`check_first_cell` judge what js/jupyterlab_seen.js reports; the rest drives the browser.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import zipfile
from pathlib import Path

from .scripts import js

CHAPTER = "02_two_level_memory.ipynb"
# Bounds on every wait, in seconds.
START_SECONDS = 90
OPEN_SECONDS = 90
RUN_SECONDS = 120
STOP_SECONDS = 20
# MyST left as text: a role (``{cite}`hk81` ``, which JupyterLab's own markdown shows as
# "{cite}hk81"; not TeX's ``\mathrm{poly}``), a directive fence (```{prf:definition}, :::{note})
# or a directive option (``:label:``).
RAW_MYST = re.compile(
    r"(?<![\w\\^_{}])\{[a-z][\w-]*(:[a-z][\w-]*)?\}(?=[`\w])"
    r"|(`{3,}|:{3,})\{[a-z][\w:-]*\}|^\s*:(label|class):",
    re.M,
)
# A value glued into the text from a cell's output (myst-nb): ``{glue:text}`name:.2f` ``.
GLUE = re.compile(r"\{glue(?::\w+)?\}`([^`]+)`")
# What the book's first cell prints when attnlib imports.
INSTALLED = re.compile(r"^attnlib \S+ is installed\.$", re.M)
# JupyterLab's settings for the check: every cell drawn (not only those in view), no news.
LAB_SETTINGS = {
    "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
}


def raw_myst(markdown: list[str]) -> list[str]:
    """How many markdown cells still show MyST markup as text (the first three are named)."""
    hits = [(i, m.group(0).strip()) for i, t in enumerate(markdown, 1) if (m := RAW_MYST.search(t))]
    if not hits:
        return []
    named = "; ".join(f"cell {i}: {text!r}" for i, text in hits[:3])
    return [f"{len(hits)} of {len(markdown)} markdown cells show MyST as text ({named})"]


def check_seen(seen: dict) -> list[str]:
    """The rendered notebook: MyST rendered, every live figure's frame and trust note shown."""
    fails = raw_myst(seen["markdown"])
    if not seen["markdown"]:
        fails.append("no markdown cell rendered")
    elif seen["boxes"] == 0:
        fails.append("no MyST admonition or proof box rendered (is jupyterlab-myst installed?)")
    if not seen["live"]:
        fails.append("no live figure (an output with an image and a control) found")
    for i, fig in enumerate(seen["live"], 1):
        if not fig["frame"]:
            fails.append(f"live figure {i}: its default frame is not shown")
        if fig["note"] is None:
            fails.append(f"live figure {i}: no note says its sliders need a trusted notebook")
        elif not fig["noteShown"]:
            fails.append(f"live figure {i}: its note on trust is hidden: {fig['note']!r}")
    return fails


def check_first_cell(before: str, prompts: list[str], first: dict | None) -> list[str]:
    """The first code cell ran (its prompt went to ``[*]`` and ended on a number, not on the
    prompt it had before), wrote nothing to stderr and said that attnlib is installed."""
    if first is None:
        return ["the notebook has no code cell"]
    fails = []
    ran = "[*]:" in prompts and re.fullmatch(r"\[\d+\]:", first["prompt"].strip())
    if not ran:
        fails.append(f"first code cell did not run: prompt {before!r}, then {prompts}")
    errors = [o["text"] for o in first["outputs"] if "stderr" in o["mime"] or "error" in o["mime"]]
    if errors:
        fails.append(f"first code cell failed: {errors[0].strip()[-300:]!r}")
    said = "\n".join(o["text"] for o in first["outputs"])
    if ran and not errors and not INSTALLED.search(said):
        fails.append(f"first code cell does not say attnlib is installed: {said.strip()[:200]!r}")
    return fails


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _write_settings(folder: Path) -> None:
    for plugin, values in LAB_SETTINGS.items():
        path = folder / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values), encoding="utf-8")


def _stop(proc: subprocess.Popen) -> None:
    """Stop the server and its kernel: its own process group, started by this check."""
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(STOP_SECONDS)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(STOP_SECONDS)


@contextlib.contextmanager
def lab_server(notebooks: Path, work: Path):
    """``jupyter lab`` serving ``notebooks`` on a free port of 127.0.0.1; yields the base URL
    and the token. Its data, configuration, runtime, workspace and settings folders are fresh
    ones under ``work``, so no notebook is trusted and no earlier layout is restored."""
    lab = Path(sys.executable).with_name("jupyter-lab")
    if not lab.is_file():
        raise RuntimeError(f"no {lab}: install the reader set (requirements-reader.txt)")
    port, token = _free_port(), secrets.token_hex(16)
    _write_settings(work / "settings")
    env = dict(os.environ)
    for name in ("DATA", "CONFIG", "RUNTIME"):
        env[f"JUPYTER_{name}_DIR"] = str(work / name.lower())
    cmd = [str(lab), "--no-browser", "--ip=127.0.0.1", f"--port={port}"]
    cmd += [f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={notebooks}"]
    cmd += [f"--LabApp.workspaces_dir={work / 'workspaces'}"]
    cmd += [f"--LabApp.user_settings_dir={work / 'settings'}"]
    if os.geteuid() == 0:  # containers run as root; Jupyter refuses that unless told
        cmd.append("--allow-root")
    log = (work / "lab.log").open("w")
    proc = subprocess.Popen(
        cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_SECONDS
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"jupyter lab exited ({proc.returncode}): {_tail(work)}")
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=5):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"jupyter lab did not start in {START_SECONDS} s") from None
                time.sleep(0.5)
        yield base, token
    finally:
        _stop(proc)
        log.close()


def _tail(work: Path) -> str:
    return (work / "lab.log").read_text(encoding="utf-8", errors="replace")[-500:]


def _run_first_cell(page) -> tuple[str, list[str]]:
    """Select the first code cell and press Shift+Enter, as a reader would; return its prompt
    before, and every prompt it showed until the kernel answered (or the time ran out)."""
    prompt = page.locator(".jp-CodeCell .jp-InputPrompt").first
    before = prompt.inner_text().strip()
    page.evaluate(
        """() => {
          const p = document.querySelector('.jp-CodeCell .jp-InputPrompt');
          window.__prompts = [];
          new MutationObserver(() => window.__prompts.push(p.innerText.trim()))
            .observe(p, {childList: true, subtree: true, characterData: true});
        }"""
    )
    prompt.click()
    page.keyboard.press("Shift+Enter")
    with contextlib.suppress(Exception):  # a cell that never ends is reported below
        page.wait_for_function(
            "() => window.__prompts.includes('[*]:') && /^\\[\\d+\\]:$/.test("
            "document.querySelector('.jp-CodeCell .jp-InputPrompt').innerText.trim())",
            timeout=RUN_SECONDS * 1000,
        )
    page.wait_for_timeout(500)
    return before, page.evaluate("() => window.__prompts")


def _look(browser, base: str, token: str, chapter: str, shots: Path) -> tuple[dict, list[str]]:
    """Open the notebook, record what is shown, run the first code cell; screenshots."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    try:
        page = context.new_page()
        page.route(lambda url: not url.startswith(base), lambda r: r.abort("blockedbyclient"))
        page.goto(f"{base}/lab/tree/{chapter}?token={token}&reset", timeout=OPEN_SECONDS * 1000)
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=OPEN_SECONDS * 1000)
        # jupyterlab-myst renders each markdown cell after the notebook is drawn; without it
        # the cells stay as JupyterLab's own markdown, which check_seen reports
        with contextlib.suppress(Exception):
            page.wait_for_selector(".jp-MarkdownCell .myst", timeout=30_000)
        page.wait_for_timeout(3000)
        stem = Path(chapter).stem
        page.screenshot(path=str(shots / f"jupyterlab-{stem}-top.png"))
        seen = page.evaluate(js("jupyterlab_seen"))
        frames = page.locator(".jp-OutputArea-output:has(input[type=range]) img")
        if frames.count():
            frames.first.scroll_into_view_if_needed()
            page.wait_for_timeout(500)
            page.screenshot(path=str(shots / f"jupyterlab-{stem}-live-figure.png"))
        page.locator(".jp-CodeCell").first.scroll_into_view_if_needed()
        before, prompts = _run_first_cell(page)
        page.screenshot(path=str(shots / f"jupyterlab-{stem}-first-cell.png"))
        seen["first"] = page.evaluate(js("jupyterlab_seen"))["first"]
        return seen, check_first_cell(before, prompts, seen["first"])
    finally:
        context.close()


def glue_shown_as_names(source: str, markdown: list[str]) -> int:
    """How many glued values show their name instead of their value: jupyterlab-myst does not
    read myst-nb's glue. Reported, not failed: the values need the online book's build."""
    text = "\n".join(markdown)
    names = set(GLUE.findall(source))
    return sum(len(re.findall(rf"(?<![\w.:]){re.escape(n)}(?![\w.:])", text)) for n in names)


def describe(seen: dict) -> str:
    """One line on what the check saw, for the log."""
    figs = ", ".join(
        f"frame {'shown' if f['frame'] else 'MISSING'} ({f['width']} px wide), note "
        + ("shown" if f["noteShown"] else "hidden" if f["note"] else "MISSING")
        for f in seen["live"]
    )
    said = " ".join(o["text"].strip() for o in (seen.get("first") or {}).get("outputs", []))
    raw = sum(bool(RAW_MYST.search(t)) for t in seen["markdown"])
    return (
        f"{seen['cells']} cells, {len(seen['markdown'])} markdown cells rendered, {raw} with MyST "
        f"as text, {seen['boxes']} MyST boxes, {seen['glue']} glued values shown as their name; "
        f"live figures: {figs or 'none'}; first code cell: "
        f"{said[:120]!r}"
    )


def check_jupyterlab(root: Path, browser, shots: Path, chapter: str = CHAPTER):
    """Open ``chapter`` from the site's notebooks.zip in JupyterLab and check what a reader
    sees; returns (failures, number of checks)."""
    archive = root / "downloads" / "notebooks.zip"
    if not archive.is_file():
        return [f"no {archive.relative_to(root)} to take {chapter} from"], 1
    work = Path(tempfile.mkdtemp(prefix="browser-check-lab-"))
    try:
        notebooks = work / "notebooks"
        with zipfile.ZipFile(archive) as zf:
            zf.extractall(work)  # notebooks/ and benchmarks/results/, as a reader unzips it
        if not (notebooks / chapter).is_file():
            return [f"{chapter} is not in {archive.name}"], 1
        with lab_server(notebooks, work) as (base, token):
            seen, first_fails = _look(browser, base, token, chapter, shots)
        source = (notebooks / chapter).read_text(encoding="utf-8")
        seen["glue"] = glue_shown_as_names(source, seen["markdown"])
        print(f"jupyterlab: {chapter}: {describe(seen)}", flush=True)
        return check_seen(seen) + first_fails, 3
    except Exception as e:  # noqa: BLE001 - reported as a failure
        return [f"{chapter} in JupyterLab: {type(e).__name__}: {e}"], 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
