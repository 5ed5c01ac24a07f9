"""The core service is wired in dependency order (issue 41): `CoreService.__init__` hands
each collaborator what it needs, and no lambda reaches back into the service for an
attribute assigned later; what needs NATS is built once connected (`Connected`)."""

from __future__ import annotations

import ast
from pathlib import Path

from ykbus.bus.service import CoreService
from ykbus.bus.settings import ServiceSettings

SERVICE = Path(__file__).parents[1] / "src" / "ykbus" / "bus" / "service.py"


def _method(name: str) -> ast.FunctionDef:
    tree = ast.parse(SERVICE.read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "CoreService")
    return next(n for n in cls.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == name)


def _reads_self(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Name) and n.id == "self" for n in ast.walk(node))


def test_no_lambda_of_the_service_reaches_back_into_it():
    for name in ("__init__", "_prepare"):  # what needs no connection, and what does
        lambdas = [n for n in ast.walk(_method(name)) if isinstance(n, ast.Lambda) and _reads_self(n)]
        assert not lambdas, f"CoreService.{name}: a lambda reads self at line {lambdas[0].lineno}"


def test_init_reads_only_attributes_it_has_assigned():
    """In source order: each `self.x` read in `__init__` was assigned above it (a bound
    method of the class counts as there)."""
    assigned = {n for n in dir(CoreService)}
    for stmt in _method("__init__").body:
        reads = [n for n in ast.walk(stmt) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
                 and n.value.id == "self" and isinstance(n.ctx, ast.Load)]
        for read in reads:
            assert read.attr in assigned, f"CoreService.__init__ reads self.{read.attr} before assigning it"
        for target in getattr(stmt, "targets", [getattr(stmt, "target", None)]):
            for n in ast.walk(target) if target is not None else ():
                if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self":
                    assigned.add(n.attr)


def test_one_lock_for_the_writer():
    service = CoreService(ServiceSettings())
    lock = service.live.lock
    assert service.leadership._writer is lock
    assert service._connected is None  # nothing that needs NATS exists before run() connects
