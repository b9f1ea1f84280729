"""A process for tests/test_prefork.py: what a forked process sees of its start.

main(["env"])          prints its environment as JSON, its folder on stderr; exits 0
main(["exit", "N"])    exits N
main(["wait"])         says "waiting" and sleeps until a signal ends it
"""

from __future__ import annotations

import json
import os
import sys
import time


def main(argv: list[str]) -> int:
    if argv[0] == "env":
        print(json.dumps(dict(os.environ)))
        print(os.getcwd(), file=sys.stderr)
        return 0
    if argv[0] == "exit":
        return int(argv[1])
    print("waiting", flush=True)
    time.sleep(600)
    return 0
