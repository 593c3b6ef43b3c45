"""The house as docs/architecture.md draws it: the picture drawn from today's contracts and folders, at most
15 modules side by side in any folder, no file over 600 lines (the import contracts themselves are checked
by ``lint-imports`` in ./scripts/test)."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
MAX_MODULES = 15
MAX_LINES = 600
#: The project's own top-level packages.
OURS = {"relay", "rules", "bench", "tests"}


def load_architecture() -> ModuleType:
    spec = importlib.util.spec_from_file_location("architecture", ROOT / "scripts" / "architecture.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["architecture"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


architecture = load_architecture()


def test_the_docs_picture_is_drawn_from_todays_contracts_and_folders() -> None:
    assert architecture.check(), "docs/architecture.md is out of date: python scripts/architecture.py --write"


def test_the_picture_names_every_layer_of_the_contract_in_order() -> None:
    drawn = architecture.picture()
    layers = next(c for c in architecture.contracts() if c.get("id") == "layers")["layers"]
    at = [drawn.index(f"\n{layer} ") for layer in layers]
    assert at == sorted(at), "the layers are drawn from the top down"
    for module in ("relay/core/room.py", "relay/shell/server.py", "relay/storage/base.py"):
        assert (ROOT / module).is_file()


def test_no_folder_holds_more_than_15_modules() -> None:
    house = architecture.measure()
    assert "relay/core" in house.folders, "the measure sees the project"
    assert "clients/js" in house.folders
    crowded = {folder: n for folder, n in house.folders.items() if n > MAX_MODULES}
    assert not crowded, f"folders over {MAX_MODULES} modules: {crowded}"


def test_no_file_is_over_600_lines() -> None:
    house = architecture.measure()
    assert "relay/shell/server.py" in house.files
    assert "clients/js/tablerelay.js" in house.files
    long = {path: n for path, n in house.files.items() if n > MAX_LINES}
    assert not long, f"files over {MAX_LINES} lines: {long}"


def test_no_module_imports_another_modules_private_names() -> None:
    """``from x import _name`` of the project's own modules (ruff's SLF001 sees ``x._name``, not this)."""
    found = []
    for root in ("relay", "rules", "bench", "scripts"):
        for path in sorted((ROOT / root).rglob("*.py")):
            if "_served" in path.parts or "node_modules" in path.parts:
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and (
                    node.level or (node.module or "").split(".")[0] in OURS
                ):
                    found += [
                        f"{path.relative_to(ROOT)}:{node.lineno} {alias.name}"
                        for alias in node.names
                        if alias.name.startswith("_") and not alias.name.startswith("__")
                    ]
    assert not found, f"private names imported across modules: {found}"
