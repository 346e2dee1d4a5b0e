"""The demo's judge: a SCRIPTED EXAMPLE, not a model. It speaks the command-judge
protocol (request JSON on stdin, answer JSON on stdout) so that `ledger demo` can show
the judge tier without any endpoint. Point a real contract at a real model instead.
"""

import json
import sys

request = json.loads(sys.stdin.read() or "{}")
print(
    json.dumps(
        {
            "verdict": "accept",
            "confidence": 0.85,
            "findings": [
                {"criterion": c, "met": True, "note": "scripted demo judge: not a real assessment"}
                for c in request.get("criteria", [])
            ],
            "reasons": ["scripted demo judge, not a model: it always accepts"],
        }
    )
)
