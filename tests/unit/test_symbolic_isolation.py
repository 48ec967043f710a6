"""Only ``nat_verify.symbolic`` imports z3 (DESIGN.md: the Z3 encoding lives in one package).

Every other module reaches the solver through ``nat_verify.symbolic``, and only where a
command asks for it, so that the concrete engines never pay for importing Z3.
"""

from __future__ import annotations

import ast
from pathlib import Path

import nat_verify

ROOT = Path(nat_verify.__file__).parent


def _imports_z3(path: Path) -> list[int]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        else:
            continue
        if any(n == "z3" or n.startswith("z3.") for n in names):
            lines.append(node.lineno)
    return lines


def test_only_the_symbolic_package_imports_z3() -> None:
    offenders = [
        f"{p.relative_to(ROOT.parent)}:{line}"
        for p in sorted(ROOT.rglob("*.py"))
        if "symbolic" not in p.relative_to(ROOT).parts
        for line in _imports_z3(p)
    ]
    assert offenders == []


def test_the_symbolic_package_does_import_z3() -> None:
    # the scan above would pass vacuously if it could not see an import
    assert any(_imports_z3(p) for p in (ROOT / "symbolic").rglob("*.py"))
