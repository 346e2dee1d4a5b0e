"""A scripted command judge for the tests: NOT a model. It reads the request on stdin
and answers as its arguments say, so that each judge failure mode can be produced."""

import json
import sys
import time

request = json.loads(sys.stdin.read() or "{}")
mode, *rest = sys.argv[1:] or ["accept", "0.9"]
if mode == "count":  # count the calls in a file, then answer as the remaining arguments say
    path, mode, *rest = rest
    with open(path, "a") as fh:
        fh.write("call\n")
confidence = float(rest[0]) if rest else 0.9
answer = {
    "verdict": mode,
    "confidence": confidence,
    "reasons": ["scripted test judge, not a model"],
    "findings": [{"criterion": c, "met": mode == "accept", "note": "scripted"} for c in request.get("criteria", [])],
}
if mode == "prose":
    print("Looks fine to me overall, I would merge it.")
elif mode == "fenced":
    answer["verdict"] = "accept"
    print("Here is my assessment.\n```json\n%s\n```\nThanks!" % json.dumps(answer))
elif mode == "unknown":
    answer["verdict"] = "maybe"
    print(json.dumps(answer))
elif mode == "hang":
    time.sleep(60)
elif mode == "exit1":
    sys.exit(1)
else:
    print(json.dumps(answer))
