"""The README's map of attnlib/ (the code block under "### The layout"), against the tree.

Usage: ``python .ci/readme_layout.py`` checks the map and exits 1 naming what is wrong;
``python .ci/readme_layout.py --write`` (``make readme-layout``) writes its attnlib/ part again
from the tree. tests/test_readme.py runs the same check.

The map lists one entry a line: ``name.py`` or ``name/`` (a subpackage), indented two spaces
a level below ``attnlib/``, then a description, which may go on over indented lines. It must
list every module of attnlib/ (a subpackage's ``__init__.py`` is its ``name/`` entry) and
nothing that is not there. A line-count claim in the section ("none is over N lines") must
hold for every file of attnlib/; a ``.py`` name on the other folders' entries (benchmarks/,
tests/) must be a file there, and every module of benchmarks/ must be named.

Writing keeps each entry still in the tree as it is written, drops the entries of modules that
are gone, and adds each new module after the last entry of its folder, described by the first
sentence of its docstring (edit it as you like: a written entry is kept). Only the attnlib/
part is written; the rest of the README is left as it is.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEADING = "### The layout"
PACKAGE = "attnlib"
NAME_WIDTH = 16  # an entry's name column, indent excluded
WIDTH = 100  # the README's line length
ENTRY = re.compile(r"^(?P<indent> *)(?P<name>[\w.]+\.py|[\w.]+/)(?: {2,}(?P<text>.*)|)$")
CLAIM = re.compile(r"\bover (\d[\d,]*) lines\b")
ANY_COUNT = re.compile(r"\b\d[\d,]* lines\b")


@dataclass
class Entry:
    """One entry of the map: its path below attnlib/ ("iomodel/flash.py", "iomodel/"), and
    its lines as written."""

    path: str
    lines: list[str] = field(default_factory=list)

    @property
    def folder(self) -> str:
        """The folder it sits in, below attnlib/ ("" for the top level)."""
        return self.path.rstrip("/").rpartition("/")[0]


@dataclass
class Layout:
    """The README split around the map: ``head`` up to and including ``attnlib/``, its
    ``entries``, and ``tail`` from the first line after them (the other folders)."""

    head: list[str]
    entries: list[Entry]
    tail: list[str]

    def text(self) -> str:
        lines = self.head + [ln for e in self.entries for ln in e.lines] + self.tail
        return "\n".join(lines)


def _block_start(lines: list[str]) -> int:
    """The index of the ``attnlib/`` line of the section's code block."""
    try:
        at = lines.index(HEADING)
        fence = next(i for i in range(at, len(lines)) if lines[i].startswith("```"))
    except (ValueError, StopIteration):
        raise SystemExit(f"README.md: no code block under {HEADING!r}") from None
    if lines[fence + 1] != f"{PACKAGE}/":
        raise SystemExit(f"README.md: the block under {HEADING!r} does not start {PACKAGE}/")
    return fence + 1


def parse(text: str) -> Layout:
    """Split the README around the map of attnlib/."""
    lines = text.split("\n")
    start = _block_start(lines)
    entries: list[Entry] = []
    folders = [""]  # the folder each indentation level opens, below attnlib/
    i = start + 1
    while i < len(lines) and lines[i].startswith("  ") and not lines[i].startswith("```"):
        m = ENTRY.match(lines[i])
        if m and len(m["indent"]) % 2 == 0 and len(m["indent"]) // 2 <= len(folders):
            depth = len(m["indent"]) // 2
            del folders[depth:]
            parent = folders[-1]
            entries.append(Entry(f"{parent}/{m['name']}".lstrip("/"), [lines[i]]))
            if m["name"].endswith("/"):
                folders.append(entries[-1].path.rstrip("/"))
        elif entries:
            entries[-1].lines.append(lines[i])
        i += 1
    return Layout(lines[: start + 1], entries, lines[i:])


def modules(package: Path) -> tuple[list[str], set[str]]:
    """What the map must list (every .py file and every subpackage, below ``package``), and
    what it may list besides (a subpackage's ``__init__.py``, which its entry describes)."""
    required, optional = [], set()
    for p in sorted(package.rglob("*.py")):
        rel = p.relative_to(package).as_posix()
        if "__pycache__" in rel:
            continue
        if p.name == "__init__.py" and p.parent != package:
            required.append(rel.removesuffix("__init__.py"))
            optional.add(rel)
        else:
            required.append(rel)
    return required, optional


def section_text(text: str) -> str:
    """The layout section: from its heading to the end of its code block."""
    after = text[text.index(HEADING) :]
    fences = [m.end() for m in re.finditer(r"^```", after, re.M)]
    return after[: fences[1]] if len(fences) > 1 else after


def tree_problems(layout: Layout, package: Path) -> list[str]:
    """Listed modules that do not exist, modules not listed, and modules listed twice."""
    required, optional = modules(package)
    counts = Counter(e.path for e in layout.entries)
    fails = [f"{PACKAGE}/{p} is listed twice" for p, k in sorted(counts.items()) if k > 1]
    known = set(required) | optional
    fails += [f"{PACKAGE}/{p} is listed but not in the tree" for p in counts if p not in known]
    fails += [f"{PACKAGE}/{p} is in the tree but not listed" for p in required if p not in counts]
    return fails


def line_count(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def claim_problems(section: str, package: Path) -> list[str]:
    """Each "over N lines" claim holds for every file of the package; a line count said in any
    other way is one this check cannot hold the README to."""
    fails = []
    sizes = {p: line_count(p) for p in package.rglob("*.py") if "__pycache__" not in p.parts}
    for m in ANY_COUNT.finditer(section):
        claim = CLAIM.search(section, m.start() - len("over "), m.end())
        if claim is None:
            fails.append(f"the line count {m.group(0)!r} is not a claim 'over N lines'")
            continue
        bound = int(claim.group(1).replace(",", ""))
        for p, n in sorted(sizes.items()):
            if n > bound:
                rel = p.relative_to(package.parent).as_posix()
                fails.append(f"{rel} has {n} lines, over the {bound} the README claims")
    return fails


def other_folder_problems(layout: Layout, root: Path) -> list[str]:
    """The other folders' entries (benchmarks/, tests/) name files that exist there, and
    benchmarks/ names each of its modules."""
    named = _named_files(layout.tail)
    fails = [
        f"{folder}/{n} is named but not there"
        for folder, names in named.items()
        for n in sorted(names)
        if not (root / folder / n).is_file()
    ]
    benchmarks = sorted(p.name for p in (root / "benchmarks").glob("*.py"))
    fails += [
        f"benchmarks/{name} is not named in the layout"
        for name in benchmarks
        if name != "__init__.py" and name not in named.get("benchmarks", set())
    ]
    return fails


def _named_files(tail: list[str]) -> dict[str, set[str]]:
    """The .py names on each folder's entry after the map of attnlib/, up to the block's end."""
    named: dict[str, set[str]] = {}
    folder = None
    for line in tail:
        if line.startswith("```"):
            break
        m = re.match(r"^(\w+)/ ", line)
        folder = m.group(1) if m else folder
        if folder is not None:
            named.setdefault(folder, set()).update(re.findall(r"\b(\w+\.py)\b", line))
    return named


def problems(root: Path = ROOT) -> list[str]:
    """Everything wrong with the README's layout section, for the tree at ``root``."""
    text = (root / "README.md").read_text(encoding="utf-8")
    layout = parse(text)
    package = root / PACKAGE
    return (
        tree_problems(layout, package)
        + claim_problems(section_text(text), package)
        + other_folder_problems(layout, root)
    )


def summary(path: Path) -> str:
    """The first sentence of a module's docstring (a subpackage: of its __init__.py)."""
    source = path / "__init__.py" if path.is_dir() else path
    doc = ast.get_docstring(ast.parse(source.read_text(encoding="utf-8"))) or ""
    para = " ".join(doc.split("\n\n")[0].split())
    para = re.sub(r":\w+:`~?([^`]+)`", r"\1", para).replace("``", "")  # reST roles, literals
    sentence = re.split(r"(?<=[a-z0-9)])\. ", para)[0].rstrip(".")
    if re.match(r"^(The|A|An) ", sentence):
        sentence = sentence[0].lower() + sentence[1:]
    return sentence or "(no docstring)"


def entry_lines(path: str, text: str) -> list[str]:
    """An entry's lines: its name in the name column, the text wrapped to the README's width."""
    depth = path.rstrip("/").count("/") + 1
    name = path.rstrip("/").rpartition("/")[2] + ("/" if path.endswith("/") else "")
    indent = "  " * depth
    column = len(indent) + max(NAME_WIDTH, len(name) + 2)
    lines, line = [], (indent + name).ljust(column)
    for word in text.split():
        if len(line) + len(word) > WIDTH and line.strip() != name:
            lines.append(line.rstrip())
            line = " " * column
        line += word + " "
    return lines + [line.rstrip()]


def _insert_at(entries: list[Entry], path: str) -> int:
    """Where a new entry goes: a top-level module after the last top-level module, a new
    subpackage last, a module of a subpackage after the last entry of that subpackage."""
    folder = Entry(path).folder
    if folder:
        after = [i for i, e in enumerate(entries) if e.path.startswith(f"{folder}/")]
    elif path.endswith("/"):
        after = [len(entries) - 1]
    else:
        after = [i for i, e in enumerate(entries) if not e.folder and not e.path.endswith("/")]
    return after[-1] + 1 if after else len(entries)


def rewrite(text: str, package: Path) -> str:
    """The README with the map of attnlib/ written again from the tree."""
    layout = parse(text)
    required, optional = modules(package)
    layout.entries = [e for e in layout.entries if e.path in required or e.path in optional]
    listed = {e.path for e in layout.entries}
    # Folders before what they hold, so that a new subpackage's modules follow its entry.
    for path in sorted(required, key=lambda p: (p.rstrip("/").count("/"), p)):
        if path not in listed:
            lines = entry_lines(path, summary(package / path))
            layout.entries.insert(_insert_at(layout.entries, path), Entry(path, lines))
    return layout.text()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="write the map of attnlib/ again")
    ap.add_argument("--root", type=Path, default=ROOT, help="the checkout (default: this one)")
    args = ap.parse_args(argv)
    readme = args.root / "README.md"
    if args.write:
        text = readme.read_text(encoding="utf-8")
        new = rewrite(text, args.root / PACKAGE)
        if new != text:
            readme.write_text(new, encoding="utf-8")
        print(f"readme-layout: {'rewrote' if new != text else 'no change to'} {readme.name}")
    fails = problems(args.root)
    for f in fails:
        print(f"readme-layout: {f}")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
