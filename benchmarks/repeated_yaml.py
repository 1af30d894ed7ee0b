"""Blocks of six or more identical YAML lines that stand in more than one place of roles/ and playbooks/.

In a role's files the role's name is replaced by ROLE first. A block is a maximal run of at least MIN_LINES
consecutive lines (compared stripped of surrounding whitespace; blank lines and comments left out) that occurs again
elsewhere - in another file or further down the same one. Each such block counts once per extra place it stands in,
the way a reader pays for it. Usage:

    PYTHONPATH=hack .venv/bin/python benchmarks/repeated_yaml.py [--min-lines 6] [--top 15]

Writes results/repeated-yaml-<UTC date>.json and prints it.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TREES = ("roles", "playbooks")


def yaml_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, stripped text) of the lines that count: not blank, not a comment, not the document marker. In a
    role's file the role's own name is written ROLE, so that two roles that differ only in their variables' prefix
    (kai_scheduler_x, volcano_x) count as the repetition they are."""
    rel = path.relative_to(REPO).parts
    role = rel[1] if rel[0] == "roles" and len(rel) > 2 else None
    out = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        text = line.strip().replace(role, "ROLE") if role else line.strip()
        if text and not text.startswith("#") and text != "---":
            out.append((n, text))
    return out


def repeated_blocks(files: dict[str, list[tuple[int, str]]], min_lines: int) -> list[dict[str, object]]:
    """The maximal runs of >= min_lines lines that stand in more than one place, each with its places."""
    windows: dict[tuple[str, ...], list[tuple[str, int]]] = defaultdict(list)
    for name, lines in files.items():
        texts = [text for _n, text in lines]
        for i in range(len(texts) - min_lines + 1):
            windows[tuple(texts[i : i + min_lines])].append((name, i))
    repeated = {k: v for k, v in windows.items() if len(v) > 1}
    # a window that continues a repeated window at every one of its places is part of a longer block: keep starts only
    starts: list[tuple[tuple[str, ...], list[tuple[str, int]]]] = []
    for key, places in repeated.items():
        continued = all(
            i > 0 and tuple(text for _n, text in files[name][i - 1 : i - 1 + min_lines]) in repeated
            for name, i in places
        )
        if not continued:
            starts.append((key, places))
    blocks = []
    for key, places in starts:
        length = min_lines
        while True:
            nxt = [files[name][i + length][1] if i + length < len(files[name]) else None for name, i in places]
            if nxt[0] is None or any(x != nxt[0] for x in nxt):
                break
            length += 1
        blocks.append(
            {
                "lines": length,
                "places": [f"{name}:{files[name][i][0]}" for name, i in places],
                "first_line": key[0],
            }
        )
    return sorted(blocks, key=lambda b: (-int(b["lines"]) * (len(b["places"]) - 1), b["places"]))  # type: ignore[arg-type]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--min-lines", type=int, default=6)
    ap.add_argument("--top", type=int, default=15)
    args = ap.parse_args()
    files = {str(p.relative_to(REPO)): yaml_lines(p) for tree in TREES for p in sorted((REPO / tree).rglob("*.yml"))}
    blocks = repeated_blocks(files, args.min_lines)
    result = {
        "benchmark": "repeated-yaml",
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "min_lines": args.min_lines,
        "files": len(files),
        "blocks": len(blocks),
        "extra_places": sum(len(b["places"]) - 1 for b in blocks),  # type: ignore[arg-type]
        "repeated_lines": sum(int(b["lines"]) * (len(b["places"]) - 1) for b in blocks),  # type: ignore[arg-type]
        "top": blocks[: args.top],
    }
    out = REPO / "benchmarks" / "results" / f"repeated-yaml-{time.strftime('%Y%m%d-%H%M', time.gmtime())}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
