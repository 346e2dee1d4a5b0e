"""Names a package loads on first use (PEP 562), from one table of name to private module:
a short process (an agent hook, a cold `ledger verify`) imports only what it asks for.
The one copy of the mechanism `receipts`, `verify`, `ledger` and `ledger.tiers` use.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (hooks import this)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, MutableMapping
    from typing import Any

__all__ = ["lazy_names"]


def lazy_names(
    package: str, where: Mapping[str, str], names: Iterable[str], space: MutableMapping[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's module-level ``__getattr__`` and ``__dir__``.

    Args:
        package: the package the modules of ``where`` are relative to (``verify``).
        where: each public name and the private module that holds it (``_source``).
        names: the package's ``__all__``, which ``__dir__`` lists.
        space: the namespace a loaded name is kept in, so that it loads once (``globals()``).

    Returns:
        ``__getattr__``, which raises `AttributeError` for a name not in ``where``, and ``__dir__``.
    """
    listed = sorted(names)

    def load(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError("module %r has no attribute %r" % (package, name))
        import importlib

        value = getattr(importlib.import_module("." + module, package), name)
        space[name] = value
        return value

    def listing() -> list[str]:
        return list(listed)

    return load, listing
