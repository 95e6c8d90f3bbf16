"""Write a copy of _config.yml that loads MathJax and the widget JavaScript from CDNs.

Used by `make book` only when npm is missing and _vendor/ could not be filled.
"""

import sys

import yaml

OFFLINE_KEYS = ("html_static_path", "mathjax_path", "nb_ipywidgets_js")


def main(src: str, dst: str) -> None:
    with open(src) as f:
        config = yaml.safe_load(f)
    sphinx_config = config.get("sphinx", {}).get("config", {})
    for key in OFFLINE_KEYS:
        sphinx_config.pop(key, None)
    with open(dst, "w") as f:
        yaml.safe_dump(config, f, sort_keys=False)
    print(f"{dst}: MathJax and widgets from CDNs (no npm to vendor them)")


if __name__ == "__main__":
    main(*sys.argv[1:3])
