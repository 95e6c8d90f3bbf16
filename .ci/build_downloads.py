"""Build what the book offers for download into _build/downloads/downloads/.

Usage: ``python .ci/build_downloads.py [STAGING]`` (default ``_build/downloads``).

- attnlib's wheel (``pip wheel --no-deps``: attnlib is pure Python);
- ``notebooks.zip``: every chapter notebook, with its committed outputs, under ``notebooks/``,
  and the committed benchmark results under ``benchmarks/results/`` (the chapters assert what
  they say about speed against them: :func:`attnlib.results.results_folder` finds them next to
  ``notebooks/``);
- ``requirements-reader.txt``: the reader set, every package running a chapter in JupyterLab needs,
  pinned to the versions the chapters were executed with;
- ``requirements.txt``: the authors' set (the reader set, plus building the book and testing).

``make book`` runs this first; book/_ext/book_site.py copies the folder into the site as
``downloads/`` and links it from the page on running a chapter locally.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(staging: str = "_build/downloads") -> None:
    out = (ROOT / staging / "downloads").resolve()
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("attnlib-*.whl"):
        old.unlink()
    # Build with the venv's setuptools when it has one (offline, fast); otherwise pip fetches
    # one into an isolated build environment, as `make setup` does for the editable install.
    isolation = [] if importlib.util.find_spec("setuptools") is None else ["--no-build-isolation"]
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", *isolation]
        + ["--wheel-dir", str(out), str(ROOT)],
        check=True,
    )
    # setuptools leaves its build/ folder in the source tree.
    shutil.rmtree(ROOT / "build", ignore_errors=True)
    notebooks = sorted((ROOT / "book").glob("*.ipynb"))
    tmp = out / "notebooks.zip.tmp"
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
        for nb in notebooks:
            zf.write(nb, f"notebooks/{nb.name}")
        # the register of claims, which the page "How each claim is checked" reads beside it
        zf.write(ROOT / "book" / "claims.yml", "notebooks/claims.yml")
        results = sorted((ROOT / "benchmarks" / "results").glob("*.csv"))
        for f in [*results, ROOT / "benchmarks" / "results" / "schema.json"]:
            zf.write(f, f"benchmarks/results/{f.name}")
    tmp.replace(out / "notebooks.zip")
    # requirements.txt includes the reader set by this relative name, which the copy keeps.
    for name in ("requirements-reader.txt", "requirements.txt"):
        shutil.copyfile(ROOT / name, out / name)
    wheel = next(out.glob("attnlib-*.whl")).name
    print(
        f"downloads: {wheel}, notebooks.zip ({len(notebooks)} notebooks, {len(results)} "
        "benchmark result files), requirements-reader.txt, requirements.txt"
    )


if __name__ == "__main__":
    main(*sys.argv[1:2])
