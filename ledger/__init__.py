"""ledger: everything that writes. The stores (SQLite embedded), the blob store, key
files, the tier runners, exports, git integration and the `ledger` CLI, which is a thin
layer over the names below: any other front end calls the same ones.

Names load on first use, so that a short command imports only what it needs.
"""

from ._api import __all__ as __all__
from ._api import __dir__ as __dir__
from ._api import __getattr__ as __getattr__

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (hooks import this)

if TYPE_CHECKING:
    from ._api import *  # noqa: F403 - the names of __all__, for type checkers
