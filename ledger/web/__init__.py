"""The window onto a ledger: a read-only web view (`ledger serve`) and the same pages as
a static site (`ledger site build`). Pages are rendered by one module (`_pages`) from an
index built from the chain and kept beside the ledger (`_index`), which finds things and
never decides them: a receipt's decision is the verifier's, computed on each request. The
target branch's commits come from git (`_branch`).
"""

from ._branch import Branch, BranchCommit
from ._index import INDEX_FILE, ChainIndex, IndexRow, TaskSummary, web_index
from ._pages import Pages, page_name, receipt_name
from ._site import build_site

__all__ = [
    "INDEX_FILE",
    "Branch",
    "BranchCommit",
    "ChainIndex",
    "IndexRow",
    "Pages",
    "TaskSummary",
    "build_site",
    "page_name",
    "receipt_name",
    "web_index",
]
