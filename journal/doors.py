"""A room's door: the names rooms above `journal/` may use of it, each loaded from its module on
first use (PEP 562's module `__getattr__`), so importing a room costs nothing until a name is
asked for, and importing one of its modules loads no other."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def door(package: str, names: Mapping[str, str]) -> Callable[[str], Any]:
    """The module `__getattr__` of `package`: `names` maps each name to its module (in the
    package) and the value, once loaded, is kept in the package like any attribute."""

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
