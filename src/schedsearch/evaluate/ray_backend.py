"""A Ray executor: expansion on a pool of actors, evaluation as Ray tasks, results streamed.

The front door of the Ray backend, the only modules that import ray (``ray_*``), and only
when a ``RayExecutor`` is made (importing them stays cheap): ``ray_executor`` (the
executor), ``ray_worker`` (the bodies of its tasks and actors), ``ray_runners`` (each node's
benchmark runner), ``ray_cluster`` (joining a cluster or starting a private one) and the
``watchdog`` program. Tasks receive plain
records (``Workload``, ``Candidate``, options) and rebuild what they need: Exo procs do not
pickle.

- Expansion: ``workers`` actors, each holding one ``expander_factory(workload, options)``
  per workload, so its cache of replayed schedule prefixes survives between calls. A
  parent is expanded by the actor that made it, whose cache holds its proc. Each actor
  runs one expansion shard at a time; the rest wait here (``ShardQueue``), the job of the
  fastest parent first (its ``priority``: a deeper parent must be clearly faster to go
  ahead of a shallower one), among equals the latest submitted: an expansion the search
  asks for while a streamed one is still being shared out (the next round grown from the
  first likely winners) goes ahead of that one's remaining shards when its parent is
  faster, while a parent's own remaining shards go ahead of its children's expansions.
  A free actor takes a busy one's waiting shard when it goes ahead of everything in its own
  queue (``shard_queue.source``): it rebuilds that parent rather than leave it waiting.
- Evaluation in two stages. A build task per candidate (``num_cpus=1``, retried once
  only when its worker dies under it, spread over the nodes)
  compiles it (``build_candidate``): builds run continuously on every worker core. The
  built kernel then goes to the benchmark runner of the node that built it: one actor
  per node (pinned there, ``max_concurrency=1``) that verifies and times one kernel at a
  time (``run_candidate``), so no build task ever waits for a lock while holding a core.
  While it times one, the node's build tasks and expanders are paused (``evaluate.quiet``).
  Each measurement names the node that timed it and the one that built it (the same).
  Infrastructure errors (``ToolchainError``, ``SearchError``) are re-raised in the driver.
- Lost work: a job whose Ray worker or node died (any Ray error: the tasks return their
  own failures as data) goes back to the queue and is built, timed or expanded again on
  a live node (``ray_losses``); only a job lost three times becomes a ``run_error``
  measurement or a failed expansion. A benchmark killed by SIGKILL, which nothing of ours
  sends it, is measured again before it counts as the candidate's: a node going down kills
  its benchmarks, and its runner may still report it.
- ``cancel`` force-cancels build tasks and kills busy runners and expanders (Ray starts
  them again); their kernels and compilers die with them.

A private cluster (no ``address``) is started with ``ray.init(address="local")`` and shut
down by ``close()``. Ray's own agents outlive a driver killed with SIGKILL for a minute or
more (raylet and gcs_server go at once, the dashboard and runtime-env agents linger while
they retry the dead GCS), so the executor also starts a tiny watchdog process that kills
whatever remains of the cluster as soon as the driver is gone.
"""

from schedsearch.evaluate.ray_executor import STREAM_LEADS_PER_ACTOR, STREAM_SHARDS_PER_ACTOR, RayExecutor

__all__ = ["STREAM_LEADS_PER_ACTOR", "STREAM_SHARDS_PER_ACTOR", "RayExecutor"]
