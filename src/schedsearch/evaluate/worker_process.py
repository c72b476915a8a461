"""Entry point of a ``LocalExecutor`` worker: ``python -m schedsearch.evaluate.worker_process R W``.

A module of its own so that running it does not import the executor's module twice.
"""

import sys

from schedsearch.evaluate.local import serve

if __name__ == "__main__":
    serve(int(sys.argv[1]), int(sys.argv[2]))
