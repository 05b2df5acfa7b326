"""Kube Queue on the fleet: the shell around `fleet.core.admission`.

One concept per module: `kubequeue` (the queue's parts, its indexes and its own serial work
queue), `tree` (the ElasticQuotaTree in force), `queues` (one Queue per quota node),
`units` (one QueueUnit per queued job), `passes` (a dequeue pass: the core decides, the units
are written, the jobs are requeued) and `gate` (what a reconcile asks of the queue). The
decisions are all the core's; docs/queue.md describes the objects and the rules.
"""
