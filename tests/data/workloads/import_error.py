from __future__ import annotations

raise RuntimeError("this workload refuses to load")
