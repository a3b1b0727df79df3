#!/usr/bin/env python3
"""A figure lives in one place (docs/benchmarks.md or docs/gpu-runs/), dated; README.md links to it.

Fails when README.md's status table states a measured figure itself (a number with %, ×, ms or µs
after it), which then goes stale beside the page that measured it, and when a link in the table
names a file or a heading that does not exist.

usage: readme_figures_test.py SOURCE_DIR
"""

import re
import sys
from pathlib import Path

FIGURE = re.compile(r"[-+−]?\d+(?:[.,]\d+)?(?:\s?[–-]\s?\d+(?:[.,]\d+)?)?\s?(?:%|×|ms\b|µs\b)(?![A-Za-z])")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#([^)\s]+))?\)")


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set:
    found = set()
    in_code = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and line.startswith("#"):
            found.add(slug(line.lstrip("#")))
    return found


def status_table(readme: Path) -> list:
    rows, inside = [], False
    for number, line in enumerate(readme.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("| part | state |"):
            inside = True
        elif inside and not line.startswith("|"):
            break
        elif inside and not line.startswith("|---"):
            rows.append((number, line))
    return rows


def main() -> int:
    root = Path(sys.argv[1])
    readme = root / "README.md"
    rows = status_table(readme)
    if not rows:
        print("README.md: no status table (a line '| part | state |')")
        return 1
    failures = 0
    for number, row in rows:
        part = row.split("|")[1].strip()[:40]
        for figure in FIGURE.findall(row):
            print(f"README.md:{number} ({part}): states the figure '{figure}'; link the page that measured it")
            failures += 1
        for target, anchor in LINK.findall(row):
            path = (readme.parent / target).resolve()
            if not path.exists():
                print(f"README.md:{number} ({part}): links {target}, which does not exist")
                failures += 1
            elif anchor and path.suffix == ".md" and anchor not in anchors(path):
                print(f"README.md:{number} ({part}): links {target}#{anchor}, which has no such heading")
                failures += 1
    if failures:
        return 1
    print(f"README.md's status table: {len(rows)} rows, no figure of its own, every link found")
    return 0


if __name__ == "__main__":
    sys.exit(main())
