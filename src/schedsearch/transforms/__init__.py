"""Workloads and the rewrite space: the only package that imports Exo.

Load a workload file into a ``Workload`` record, enumerate plausible schedule rewrites at a
proc, replay schedules on a fresh proc (in any process: procs are rebuilt from the
workload's source text), generate C and fingerprint it, and export schedules as scripts.
Importing it changes nothing in Exo: an ``Expander`` installs ``exo_patches`` in the
process it expands in.
"""

from schedsearch.transforms.codegen import (
    fingerprint,
    kernel_c,
    loop_nest_text,
    proc_text,
)
from schedsearch.transforms.expand import Expander, propose, root_candidate
from schedsearch.transforms.replay import build_proc, try_apply, user_c
from schedsearch.transforms.rules import ArgError
from schedsearch.transforms.rules import decode as decode_step
from schedsearch.transforms.rules import describe as describe_step
from schedsearch.transforms.script import schedule_script
from schedsearch.transforms.workload import list_procs, load_workload

__all__ = [
    "ArgError",
    "Expander",
    "build_proc",
    "decode_step",
    "describe_step",
    "fingerprint",
    "kernel_c",
    "list_procs",
    "load_workload",
    "loop_nest_text",
    "proc_text",
    "propose",
    "root_candidate",
    "schedule_script",
    "try_apply",
    "user_c",
]
