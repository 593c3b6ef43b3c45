#!/usr/bin/env python3
"""The layers picture of docs/architecture.md, drawn from the import-linter contracts in pyproject.toml.

The contracts are what CI enforces (``lint-imports``); the picture is made from them and from the folders
as they are, so the doc cannot drift from either:

    python scripts/architecture.py           # print the picture
    python scripts/architecture.py --write   # put it into docs/architecture.md
    python scripts/architecture.py --check   # exit 1 when the doc's picture is not today's (the tests run it)

The same module also measures the house (``measure``): modules per folder and lines per file, which the
tests hold to at most 15 and at most 600.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
BEGIN = "<!-- layers: drawn by scripts/architecture.py from pyproject's contracts; do not edit by hand -->"
END = "<!-- /layers -->"
#: The source kinds counted as modules, and the folders that hold none of the project's own code.
SOURCES = (".py", ".js", ".mjs", ".ts")
SKIPPED = {"node_modules", "__pycache__", "_served", "results", "images", "lang", "styles"}
WIDTH = 110
NBSP = "\u00a0"


def contracts(pyproject: Path = ROOT / "pyproject.toml") -> list[dict[str, object]]:
    """The import-linter contracts, as pyproject.toml writes them."""
    with pyproject.open("rb") as fh:
        config = tomllib.load(fh)
    found: list[dict[str, object]] = config["tool"]["importlinter"]["contracts"]
    return found


def _modules(folder: Path) -> list[str]:
    """What a folder holds, as the picture names it: its modules (no ``__init__``) and its sub-packages."""
    names = []
    for item in sorted(folder.iterdir()):
        if item.is_dir() and (item / "__init__.py").exists():
            names.append(item.name + "/")
        elif item.suffix == ".py" and item.name != "__init__.py":
            names.append(item.stem)
    return names


def _folder(module: str) -> Path:
    return ROOT.joinpath(*module.split("."))


def _block(title: str, folder: Path) -> list[str]:
    """A layer's line: its name, then what it holds, wrapped under the name."""
    parts = []
    for name in _modules(folder):
        if name.endswith("/"):
            inner = ", ".join(n.rstrip("/") for n in _modules(folder / name.rstrip("/")))
            # No-break spaces keep a subfolder and what it holds on one line; put back after wrapping.
            parts.append(f"{name} ({inner})".replace(" ", NBSP))
        else:
            parts.append(name)
    indent = " " * 17
    body = textwrap.wrap(
        " · ".join(parts), WIDTH - len(indent), break_on_hyphens=False, break_long_words=False
    )
    lines = [f"{title:<17}{body[0]}"] if body else [title]
    lines += [indent + line for line in body[1:]]
    return [line.replace(NBSP, " ") for line in lines]


def picture() -> str:
    """The layers from the top down, each with what it holds, and the other contracts under them."""
    by_id = {str(c.get("id")): c for c in contracts()}
    layers = [str(layer) for layer in by_id["layers"]["layers"]]  # type: ignore[attr-defined]
    lines = [
        "clients/         js · web · foundry · roll20: speak the wire protocol (spec/protocol.md)",
        "   │ WebSocket",
    ]
    for i, layer in enumerate(layers):
        lines += _block(layer, _folder(layer))
        if i < len(layers) - 1:
            lines.append("   │")
    lines += [
        "",
        "The rules core: relay.core and the roll command call it; it imports nothing of relay.",
    ]
    lines += _block("rules", ROOT / "rules")
    lines.append("")
    lines.append(
        "Arrows point down only; every contract below is checked by `lint-imports` in ./scripts/test:"
    )
    for contract in contracts():
        lines.append(f"- {contract['name']} ({contract['type']})")
    return "\n".join(["```text", *lines, "```"])


def _doc_block(text: str) -> tuple[int, int]:
    start = text.index(BEGIN) + len(BEGIN)
    return start, text.index(END, start)


def check() -> bool:
    """Whether docs/architecture.md holds today's picture."""
    text = DOC.read_text(encoding="utf-8")
    start, end = _doc_block(text)
    return text[start:end].strip() == picture()


def write() -> None:
    text = DOC.read_text(encoding="utf-8")
    start, end = _doc_block(text)
    DOC.write_text(text[:start] + "\n" + picture() + "\n" + text[end:], encoding="utf-8")


@dataclass(frozen=True)
class House:
    """How big the rooms are: modules per folder and lines per file, over the project's own code."""

    folders: dict[str, int]
    files: dict[str, int]


def measure(roots: tuple[str, ...] = ("relay", "rules", "bench", "clients", "tests", "scripts")) -> House:
    folders: dict[str, int] = {}
    files: dict[str, int] = {}
    for name in roots:
        for folder in [ROOT / name, *sorted((ROOT / name).rglob("*"))]:
            if not folder.is_dir() or SKIPPED.intersection(folder.relative_to(ROOT).parts):
                continue
            sources = [f for f in folder.iterdir() if f.is_file() and f.suffix in SOURCES]
            modules = [f for f in sources if f.name != "__init__.py" and not f.name.endswith(".d.ts")]
            folders[folder.relative_to(ROOT).as_posix()] = len(modules)
            for source in sources:
                with source.open(encoding="utf-8") as fh:
                    files[source.relative_to(ROOT).as_posix()] = sum(1 for _ in fh)
    return House(folders, files)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true", help="put the picture into docs/architecture.md")
    parser.add_argument("--check", action="store_true", help="exit 1 when the doc's picture is out of date")
    args = parser.parse_args(argv)
    if args.write:
        write()
    elif args.check:
        if not check():
            print("docs/architecture.md's picture is out of date: python scripts/architecture.py --write")
            return 1
    else:
        print(picture())
    return 0


if __name__ == "__main__":
    sys.exit(main())
