"""Export a schedule as a standalone Python script that uses Exo directly."""

from __future__ import annotations

from schedsearch.core import Schedule, Workload
from schedsearch.targets import schedule_target
from schedsearch.transforms.calls import FIND_IN_SOURCE, OPS, imports_needed, needs_find_in, render
from schedsearch.transforms.rules import describe, lower

_TEMPLATE = '''\
"""Schedule for {label}, {count} step(s), for the {target} target.

Re-applies the schedule with Exo's own scheduling operations and prints the C code.
Run it with Python; the workload file is found relative to this script.
"""

import importlib.util
import os

{imports}from exo.stdlib.scheduling import {ops}

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOAD = os.path.join(HERE, {workload_path!r})

spec = importlib.util.spec_from_file_location("schedsearch_exported_workload", WORKLOAD)
workload = importlib.util.module_from_spec(spec)
spec.loader.exec_module(workload)
{helpers}
p = workload.{proc}{bind}
{steps}
print(p.c_code_str())
'''


def schedule_script(workload: Workload, schedule: Schedule, workload_path: str) -> str:
    """A readable script that loads the workload file (``workload_path``, absolute or
    relative to the script), binds the sizes with ``partial_eval``, applies each step with
    Exo's scheduling calls and prints the C. Its C equals ``user_c(workload, schedule)``.
    """
    lines: list[str] = []
    all_calls = []
    for index, step in enumerate(schedule.steps):
        calls = lower(step)
        all_calls.extend(calls)
        lines.append(f"# step {index}: {describe(step)}")
        lines.extend(render(call) for call in calls)
    used_ops = sorted({call.op for call in all_calls} & OPS) or ["simplify"]
    imports = "".join(f"from {module} import {', '.join(names)}\n" for module, names in imports_needed(all_calls).items())
    helpers = f"\n\n{FIND_IN_SOURCE}\n" if needs_find_in(all_calls) else ""
    bind = ""
    if workload.sizes:
        bind = ".partial_eval(" + ", ".join(f"{k}={v}" for k, v in workload.sizes) + ")"
    return _TEMPLATE.format(
        label=workload.label,
        count=len(schedule),
        target=schedule_target(schedule),
        ops=", ".join(used_ops),
        imports=imports,
        helpers=helpers,
        workload_path=workload_path,
        proc=workload.proc,
        bind=bind,
        steps="\n".join(lines),
    )
