"""The store contract's part on where a measurement was taken: the machine of the node that
timed it and the cluster nodes that timed and built it (``Measurement.machine``, ``node``,
``built_node``), kept per candidate so that a search spanning several nodes says which
node each result came from. ``StoreContract`` includes these tests; they use the same
``store`` fixture.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from schedsearch.core import Measurement, Status
from schedsearch.testing.builders import make_candidate, make_config, make_machine, make_measurement, make_workload

_NODE_A = "a1" * 28  # Ray node ids are 56 hex digits
_NODE_B = "b2" * 28


class NodeContract:
    """Tests of the per-candidate machine and nodes. Mixed into ``StoreContract``."""

    def test_each_measurement_names_the_nodes_that_timed_and_built_it(self, store: Any) -> None:
        sid = store.create_search(make_workload(), make_config(), make_machine())
        root, child, other = make_candidate("root"), make_candidate("x"), make_candidate("y")
        child = dataclasses.replace(child, parent=root.fingerprint, depth=1)
        other = dataclasses.replace(other, parent=root.fingerprint, depth=1)
        for c in (root, child, other):
            store.add_candidate(sid, c)
        machine_b = dataclasses.replace(make_machine(), hostname="node-2", cpu_model="Other CPU")
        timed_a = dataclasses.replace(make_measurement(root, 0.5), node=_NODE_A, built_node=_NODE_A)
        timed_b = dataclasses.replace(
            make_measurement(child, 0.25), machine=machine_b, node=_NODE_B, built_node=_NODE_B
        )
        # A kernel that did not build was never timed: only the node that built it is known.
        failed = dataclasses.replace(make_measurement(other, None, Status.BUILD_ERROR), built_node=_NODE_B)
        recs = [store.record_measurement(sid, m, None, None) for m in (timed_a, timed_b, failed)]
        assert [(r.node, r.built_node) for r in recs] == [(_NODE_A, _NODE_A), (_NODE_B, _NODE_B), ("", _NODE_B)]
        assert [r.machine for r in recs] == [make_machine(), machine_b, make_machine()]
        assert recs[1].machine is not None and recs[1].machine.fingerprint != make_machine().fingerprint
        # Read back every way a store gives candidates.
        assert store.candidates(sid) == recs
        assert [store.get_candidate(r.id) for r in recs] == recs
        assert [(r.node, r.machine) for r in store.candidates(sid, code=False)] == [(r.node, r.machine) for r in recs]
        # A later measurement elsewhere (finalists re-measured side by side) replaces where it was taken.
        again = dataclasses.replace(timed_b, node=_NODE_A, built_node=_NODE_A, machine=make_machine())
        rec = store.record_measurement(sid, again, None, None)
        assert (rec.node, rec.built_node, rec.machine) == (_NODE_A, _NODE_A, make_machine())

    def test_a_measurement_outside_a_cluster_names_no_node(self, store: Any) -> None:
        sid = store.create_search(make_workload(), make_config(), make_machine())
        root = make_candidate("root")
        store.add_candidate(sid, root)
        rec = store.record_measurement(sid, Measurement(root.fingerprint, Status.RUN_ERROR, error="x"), None, None)
        assert (rec.machine, rec.node, rec.built_node) == (None, "", "")
        assert store.get_candidate(rec.id) == rec
