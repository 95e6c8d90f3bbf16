"""What the browser check prints: a line per page, the budget and alt-text tables, the live
figures, and the summary that ends the run with its exit status."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from .settings import BUDGET_BYTES, BUDGET_SECONDS, LIVE_WIDTHS


def page_line(rel: str, fails: list[str], checks: Counter, secs: float) -> str:
    status = "ok  " if not fails else "FAIL"
    return f"  {status} {rel:<48} {sum(checks.values()):5d} checks {secs:5.1f} s"


def _over_budget(weight: int, ready: float, widgets: int) -> str:
    over = [
        name
        for name, bad in (("weight", weight > BUDGET_BYTES), ("time", ready > BUDGET_SECONDS))
        if bad
    ]
    note = ("over budget: " + ", ".join(over)) if over else "within budget"
    return note + (f" ({widgets} live figures)" if widgets else "")


def report_budget(rows) -> None:
    """Each page's weight and time until ready, against the budget."""
    print(
        f"browser-check: page weight (all files loaded, uncompressed; budget "
        f"{BUDGET_BYTES / 1e6:.0f} MB) and time until ready (budget {BUDGET_SECONDS:.0f} s):"
    )
    for rel, weight, ready, widgets in rows:
        note = _over_budget(weight, ready, widgets)
        print(f"  {rel:<48} {weight / 1e6:6.2f} MB {ready:5.2f} s  {note}")


def report_alt(rows) -> None:
    """How many images have a real alt text, and the pages with some that do not."""
    n = sum(r[1] for r in rows)
    bad = [(rel, t) for rel, _, t, _ in rows if t]
    widget = sum(r[3] for r in rows)
    print(
        f"browser-check: alt text: {n - sum(t for _, t in bad)} of {n} images have a real one"
        f" ({widget} more drawn by live widgets, left to the widget check)"
    )
    for rel, t in bad:
        print(f"  {rel}: {t} images without")


def report_live(rows, n: int, recomputed: int) -> None:
    """The live figures checked, with their frame counts."""
    print(
        f"browser-check: live figures: {len(rows)} on {len({r[0] for r in rows})} pages, "
        f"{n} states checked at {' and '.join(map(str, LIVE_WIDTHS))} px, "
        f"{recomputed} frames recomputed"
    )
    for rel, name, count in rows:
        print(f"  {rel:<48} {name:<24} {count:4d} frames")


def summary(
    failures: dict, totals: Counter, remote: Counter, n_pages: int, secs: float, shots: Path
) -> int:
    """The checks by kind, the blocked hosts, and every failure; the exit status (1 on any)."""
    by_kind = ", ".join(f"{k} {v}" for k, v in sorted(totals.items()))
    print(
        f"browser-check: {n_pages} pages, {sum(totals.values())} checks ({by_kind}), "
        f"{secs:.1f} s; screenshots in {shots}"
    )
    hosts = ", ".join(f"{h} ({c})" for h, c in remote.most_common()) or "none"
    print(f"browser-check: blocked remote requests: {hosts}")
    if not failures:
        print("browser-check: all pages passed")
        return 0
    n = sum(len(v) for v in failures.values())
    print(f"browser-check: FAILED: {n} problems on {len(failures)} pages")
    for rel, fails in failures.items():
        for f in fails:
            print(f"  {rel}: {f}")
    return 1
