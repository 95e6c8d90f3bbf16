"""``python .ci/browser_check _build/html ...``: run the check as a folder. Python puts this
folder itself first on sys.path; the folder above it goes there instead, so the modules
import as the package ``browser_check`` and no module here shadows a library's."""

import importlib
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

sys.exit(importlib.import_module("browser_check.cli").main())
