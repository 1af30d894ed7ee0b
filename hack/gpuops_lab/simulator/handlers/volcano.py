"""VolcanoQueueHandler: plays the one part of Volcano's controller-manager (v1.15.1, pkg/controllers/queue) that the
real vc-scheduler of the lab cannot do without: a new Queue is opened.

Upstream: the queue controller syncs every Queue; `state.NewState` treats an empty `status.state` as open, and
`openState.Execute` (SyncQueueAction) writes `status.state: Open` (server-side apply of the status, field manager
`queue-controller`); before that, `updateQueueParent` JSON-patches `spec.parent: root` into every Queue other than
`root` that names no parent. The scheduler's proportion and capacity plugins allocate only for, and enqueue only into,
a Queue whose `status.state` is `Open` (proportion.go: "is not open state, reject job"), so without this nothing that
vc-scheduler sees is ever scheduled - the `default` and `root` Queues it creates itself at start included.

Here, for each Queue (scheduling.volcano.sh/v1beta1): `spec.parent: root` where upstream sets it, and
`status.state: Open` while the state is empty; nothing else. A Queue already Open, Closed, Closing or Unknown is left
alone: closing and reopening (bus.volcano.sh Commands from vcctl) and the per-phase PodGroup counts are not played,
nor is anything else of the controller-manager (vcjob -> PodGroup, the podgroup controller that makes PodGroups for
bare pods, garbage collection). The lab does not run Volcano's webhooks either.

The handler waits while the Queue kind is not served (no Volcano CRDs: the lab installs them before vc-scheduler
starts, which is before the simulator)."""

from __future__ import annotations

from ..framework import Context, Handler, Key, Kind

QUEUE = Kind("scheduling.volcano.sh/v1beta1", "Queue")
ROOT = "root"
OPEN = "Open"


class VolcanoQueueHandler(Handler):
    """Opens new Volcano Queues (see the module docstring)."""

    name = "VolcanoQueue"
    primary = QUEUE

    def reconcile(self, ctx: Context, key: Key) -> float | None:
        queue = ctx.primary
        if queue is None or (queue.get("metadata") or {}).get("deletionTimestamp"):
            return None
        if key.name != ROOT and not (queue.get("spec") or {}).get("parent"):
            queue = ctx.client.patch(QUEUE.api_version, QUEUE.kind, key.name, None, {"spec": {"parent": ROOT}}, "merge")
            ctx.log("set spec.parent of Queue %s to %s", key.name, ROOT)
            ctx.sim.write_through(queue)
        if not (queue.get("status") or {}).get("state"):
            ctx.patch_status(queue, {"state": OPEN})
        return None
