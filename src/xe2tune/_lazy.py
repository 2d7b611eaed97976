"""A package's exported names, each loaded with its module on first use (PEP 562).

``kernels`` and ``tuner`` export many names from modules that pull in NumPy, optuna and the
kernel families; a CLI command that needs one light name (``ProblemSpec``, a sampler's name)
then starts without the rest.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, exports: Mapping[str, tuple[str, ...]], namespace: dict[str, Any],
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """``__getattr__``, ``__dir__`` and ``__all__`` for ``package``, whose ``exports`` map each
    submodule (``"_config"``) to the names it exports; ``namespace`` is the package's
    ``globals()``, where a name once loaded is kept (later reads skip ``__getattr__``)."""
    module_of = {name: module for module, names in exports.items() for name in names}

    def __getattr__(name: str) -> Any:  # noqa: N807  (the module hook's own name)
        module = module_of.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:  # noqa: N807
        return sorted({*namespace, *module_of})

    return __getattr__, __dir__, sorted(module_of)
