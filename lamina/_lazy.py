"""Modules imported on first use.

`lamina --help`, the hooks that only start a worker, and a retain of an unchanged file never
touch a vector, yet importing numpy costs them about 50-90 ms each time. Modules on those paths
write

    if TYPE_CHECKING:
        import numpy as np
    else:
        from .._lazy import numpy as np

so type checkers see numpy itself while the running program imports it only when an attribute
is first looked up (`np.frombuffer`, `np.float32`, ...). After that first lookup every attribute
is read from the proxy's own namespace, at the cost of a plain module attribute.
"""

from __future__ import annotations

import importlib
import types
from typing import Any

__all__ = ["LazyModule", "numpy"]


class LazyModule(types.ModuleType):
    """Stands for the module `name` and imports it the first time an attribute is asked for."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.__dict__["_lazy_loaded"] = False

    def __getattr__(self, attr: str) -> Any:
        # Called only for names not in the proxy's namespace: load once, then copy the real
        # module's namespace in, so that later lookups never come here.
        module = importlib.import_module(self.__name__)
        if not self.__dict__["_lazy_loaded"]:
            self.__dict__.update({k: v for k, v in vars(module).items() if not k.startswith("__")})
            self.__dict__["_lazy_loaded"] = True
        return getattr(module, attr)

    def __repr__(self) -> str:
        return f"<lazy module {self.__name__!r}>"


numpy = LazyModule("numpy")
