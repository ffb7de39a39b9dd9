"""The report of scripts/flake-hunt: every test that failed (or errored) in any of its runs, from their JUnit XML."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path


def failures(xml_file: Path) -> dict[str, str]:
    """Test id -> the first lines of its failure, for one run; a run with no XML (pytest crashed) is one failure."""
    if not xml_file.exists():
        return {f"<run {xml_file.stem}: no results, see its log>": ""}
    found: dict[str, str] = {}
    for case in ET.parse(xml_file).getroot().iter("testcase"):
        for kind in ("failure", "error"):
            element = case.find(kind)
            if element is not None:
                test = f"{case.get('classname', '')}::{case.get('name', '')}"
                text = (element.get("message") or element.text or "").strip().splitlines()
                found[test] = "\n".join(text[:3])
    return found


def report(folder: Path, runs: int) -> tuple[str, int]:
    """The report's text and the number of tests that failed at least once."""
    count: Counter[str] = Counter()
    first: dict[str, str] = {}
    for i in range(1, runs + 1):
        for test, text in failures(folder / f"run-{i}.xml").items():
            count[test] += 1
            first.setdefault(test, text)
    lines = [f"{runs} runs; {len(count)} test(s) failed at least once"]
    for test, n in count.most_common():
        lines.append(f"- {test}: failed in {n}/{runs} runs")
        lines += [f"    {line}" for line in first[test].splitlines()]
    return "\n".join(lines) + "\n", len(count)


def main(argv: list[str]) -> int:
    folder, runs = Path(argv[0]), int(argv[1])
    text, failed = report(folder, runs)
    (folder / "report.txt").write_text(text)
    sys.stdout.write(text)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
