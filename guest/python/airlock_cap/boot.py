"""The single-shot boot shape: run one program and send exactly one outcome.

    python3 -m airlock_cap.boot PROGRAM.py [ARGS...]

PROGRAM.py is run as a module named "__airlock_main__" (so an
`if __name__ == "__main__":` block does not run); then its `main()` is called
if it has one. main's return value is the outcome Completed(value), unless it
returns an airlock_cap.Completed or Errored itself. An exception (or a
SystemExit with a non-zero status) is Errored(message, details) with the
exception type and the end of its traceback. The outcome is the last frame the
program sends (docs/wire.md, "outcome"); the process then exits 0 when it sent
Completed and 1 when it sent Errored.
"""

from __future__ import annotations

import runpy
import sys
import traceback

import airlock_cap
from airlock_cap import Completed, Errored


def _errored(e: BaseException) -> Errored:
    tb = "".join(traceback.format_exception(type(e), e, e.__traceback__))
    details = {"type": type(e).__name__, "traceback": airlock_cap.cut_back(tb, 4000)}
    if isinstance(e, airlock_cap.CapError):
        details["code"] = e.code
    return Errored(airlock_cap.cut_front(f"{type(e).__name__}: {e}", 2000), details)


def run_program(path: str) -> "Completed | Errored":
    try:
        module = runpy.run_path(path, run_name="__airlock_main__")
        main = module.get("main")
        value = main() if callable(main) else None
    except SystemExit as e:
        if e.code in (None, 0):
            return Completed(None)
        return Errored(f"the program exited with status {e.code}", {"type": "SystemExit"})
    except BaseException as e:  # noqa: B902 - every failure becomes an outcome
        return _errored(e)
    if isinstance(value, (Completed, Errored)):
        return value
    return Completed(value)


def main() -> int:
    if len(sys.argv) < 2:
        print("usage: python3 -m airlock_cap.boot PROGRAM.py [ARGS...]", file=sys.stderr)
        return 2
    sys.argv = sys.argv[1:]
    try:
        ch = airlock_cap.channel()
    except airlock_cap.CapError as e:
        print(f"airlock_cap: {e}", file=sys.stderr)
        return 2
    outcome = run_program(sys.argv[0])
    try:
        outcome = ch.send_outcome(outcome)
    except OSError as e:
        print(f"airlock_cap: could not send the outcome: {e}", file=sys.stderr)
        return 2
    ch.close()
    return 0 if isinstance(outcome, Completed) else 1


if __name__ == "__main__":
    sys.exit(main())
