"""Kube Queue admission: which queued jobs are released to gang placement, and when (pure).

One concept per module:

* `phases`: a unit's phases, its spec (what the shell tells) and state (what it persists);
* `policies`: the Queue policies (Priority, Block, FIFO);
* `settings`: placement timeout, backoff, what a unit with no quota does;
* `decisions`: what a pass decides (dequeue, backoff, requeue, notices) and why a unit waits;
* `usage`: what a quota node holds;
* `unit`, `line`, `fit`: the in-memory unit, a quota node's waiting line, the fit test;
* `admission`: `Admission`, the queue's events and its dequeue pass (docs/queue.md);
* `bookkeeping`: its state: units, what each quota node holds, lines, timers, notices;
* `minimum`: every way the queue asks "within min", each named for its question;
* `claims`: reclaim's orchestration (who claims, what an eviction changes in the books);
* `explain`: why a unit waits, in words and numbers;
* `ending`: when a job's unit ends (the one rule the controller and the simulator share);
* `restore`: how a persisted unit is read back after a restart;
* `recharge`: whether a gang that runs though its unit is not Dequeued (placed late, or a
  reclaim's victim that had moved) holds its quota again;
* `reasons`: which condition reason a waiting unit's job carries;
* `reclaim`: which running gangs to evict so that a waiting gang starts (reclaim, preemption);
* `hold`: the room an eviction frees, held for its claimant until it is placed or gives up;
* `work`: how much of the fleet a gang holds, every resource counted (what work lost weighs);
* `worth`: whether an eviction is worth its cost, from what the controller knows.

Everything the shell and the simulator use is re-exported here.
"""

from fleet.core.admission.admission import Admission
from fleet.core.admission.decisions import (
    Backoff,
    Dequeue,
    Evict,
    Notice,
    NoticeKind,
    Plan,
    Requeue,
    WaitKind,
    WaitReason,
)
from fleet.core.admission.ending import JobEnd, unit_end
from fleet.core.admission.line import order_key
from fleet.core.admission.phases import (
    DEQUEUED,
    ENQUEUED,
    FAILED,
    HOLDING,
    PHASES,
    RUNNING,
    SUCCEED,
    TERMINAL,
    TIMEOUT_BACKOFF,
    Phase,
    UnitSpec,
    UnitState,
)
from fleet.core.admission.policies import BLOCK, FIFO, POLICIES, PRIORITY, QueuePolicy
from fleet.core.admission.reasons import LOUD_REASONS, REASON_QUEUED, waiting_reason
from fleet.core.admission.recharge import Charge, charge_decision
from fleet.core.admission.reclaim import (
    PREEMPT,
    RECLAIM,
    Choice,
    Claim,
    Placed,
    Runner,
    choose,
)
from fleet.core.admission.restore import restored_state
from fleet.core.admission.settings import AdmissionSettings, NoQuotaMode
from fleet.core.admission.usage import QuotaUsage
from fleet.core.admission.work import WorkWeights

__all__ = [
    "BLOCK",
    "DEQUEUED",
    "ENQUEUED",
    "FAILED",
    "FIFO",
    "HOLDING",
    "LOUD_REASONS",
    "PHASES",
    "POLICIES",
    "PREEMPT",
    "PRIORITY",
    "REASON_QUEUED",
    "RECLAIM",
    "RUNNING",
    "SUCCEED",
    "TERMINAL",
    "TIMEOUT_BACKOFF",
    "Admission",
    "AdmissionSettings",
    "Backoff",
    "Charge",
    "Choice",
    "Claim",
    "Dequeue",
    "Evict",
    "JobEnd",
    "NoQuotaMode",
    "Notice",
    "NoticeKind",
    "Phase",
    "Placed",
    "Plan",
    "QueuePolicy",
    "QuotaUsage",
    "Requeue",
    "Runner",
    "UnitSpec",
    "UnitState",
    "WaitKind",
    "WaitReason",
    "WorkWeights",
    "charge_decision",
    "choose",
    "order_key",
    "restored_state",
    "unit_end",
    "waiting_reason",
]
