"""The window onto a ledger: a read-only web view (`ledger serve`) and the same pages as
a static site (`ledger site build`). Pages are rendered by one module (`_pages`) from an
index built from the chain (`_index`), which finds things and never decides them: a
receipt's decision is the verifier's, computed on each request.
"""

from ._index import ChainIndex, IndexRow
from ._pages import Pages, page_name, receipt_name
from ._site import build_site

__all__ = ["ChainIndex", "IndexRow", "Pages", "build_site", "page_name", "receipt_name"]
