"""Entry point of a ``LocalExecutor`` worker: ``python -m schedsearch.evaluate.worker_process R W``.

A module of its own so that running it does not import the executor's module twice.
"""

import os
import sys
import traceback

from schedsearch.evaluate.local import serve

if __name__ == "__main__":
    code = 0
    try:
        serve(int(sys.argv[1]), int(sys.argv[2]))
    except SystemExit as e:  # SIGTERM (a cancel) or the caller's death
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:  # noqa: BLE001 - reported, then the same quiet exit
        traceback.print_exc()
        code = 1
    # No interpreter shutdown: finalizers of the solver objects Exo leaves behind (pysmt's
    # z3 wrappers) can raise while modules are torn down, printing tracebacks onto the
    # user's terminal under the live view. Everything the caller needs went through the pipe.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
