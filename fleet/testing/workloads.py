"""Job manifests (the kinds fleet dispatches) and Gang policies for tests and the demo."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from fleet.core.kinds import ADAPTERS, adapter_for

OUTCOME_LABEL = "sandbox.fleet.dev/outcome"
JOB_NAME_LABEL = "training.kubeflow.org/job-name"


def outcome_template_patch(job: dict[str, Any], outcome: str) -> dict[str, Any]:
    """A merge patch giving every pod template of a job (any kind fleet dispatches) the
    outcome label.

    Label the pods too: kwok acts on pods. The templates matter for the pods the job's operator
    creates again: on backoffLimit the training operator deletes the pods before it writes
    Failed, and when that write conflicts it loses the failure and starts fresh pods; the Job
    controller replaces failed pods until its backoffLimit. A job whose code fails would fail
    there too, so they must carry the outcome as well.
    """
    adapter = adapter_for(job["apiVersion"], job["kind"])
    if adapter is None:
        raise ValueError(f"{job.get('kind')} {job['metadata']['name']} is no kind fleet dispatches")
    patch: dict[str, Any] = {}
    for t in adapter.templates(job):
        node = patch
        for part in t.field.split("."):
            node = node.setdefault(part, {})
        node["metadata"] = {"labels": {OUTCOME_LABEL: outcome}}
    return patch


def _template(gpus: int, cpu: str, node_selector: dict[str, str] | None) -> dict[str, Any]:
    limits: dict[str, Any] = {"cpu": cpu}
    if gpus:
        limits["nvidia.com/gpu"] = gpus
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "pytorch",
                "image": "docker.io/kubeflowkatib/pytorch-mnist:v1beta1-45c5727",
                "command": ["python3", "/opt/pytorch-mnist/mnist.py", "--epochs=1"],
                "resources": {"limits": limits},
            }
        ]
    }
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    return {"spec": spec}


def pytorchjob(
    name: str,
    *,
    workers: int = 2,
    gpus: int = 1,
    master_gpus: int | None = None,
    cpu: str = "1",
    namespace: str | None = None,
    node_selector: dict[str, str] | None = None,
    restart_policy: str = "OnFailure",
    backoff_limit: int | None = None,
) -> dict[str, Any]:
    """A PyTorchJob with one Master and `workers` Workers, `gpus` GPUs each."""
    specs = {
        "Master": {
            "replicas": 1,
            "restartPolicy": restart_policy,
            "template": _template(gpus if master_gpus is None else master_gpus, cpu, node_selector),
        },
        "Worker": {
            "replicas": workers,
            "restartPolicy": restart_policy,
            "template": _template(gpus, cpu, node_selector),
        },
    }
    job: dict[str, Any] = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {"pytorchReplicaSpecs": specs},
    }
    if namespace:
        job["metadata"]["namespace"] = namespace
    if backoff_limit is not None:
        job["spec"]["runPolicy"] = {"backoffLimit": backoff_limit}
    return job


def batch_job(
    name: str,
    *,
    pods: int = 2,
    gpus: int = 1,
    cpu: str = "1",
    namespace: str | None = None,
    node_selector: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A batch/v1 Job running `pods` pods at once (parallelism = completions), `gpus` GPUs each;
    `backoffLimit: 0`, so one failed pod fails it (its template cannot be changed later)."""
    template = _template(gpus, cpu, node_selector)
    template["spec"]["restartPolicy"] = "Never"
    job: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {"parallelism": pods, "completions": pods, "backoffLimit": 0, "template": template},
    }
    if namespace:
        job["metadata"]["namespace"] = namespace
    return job


def mpijob(
    name: str,
    *,
    workers: int = 2,
    gpus: int = 1,
    cpu: str = "1",
    namespace: str | None = None,
    node_selector: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A training-operator (kubeflow.org/v1) MPIJob: one Launcher without GPUs and `workers`
    Workers with `gpus` each; restartPolicy Never, so a failing launcher fails the job."""
    specs = {
        "Launcher": {
            "replicas": 1,
            "restartPolicy": "Never",
            "template": _template(0, cpu, node_selector),
        },
        "Worker": {
            "replicas": workers,
            "restartPolicy": "Never",
            "template": _template(gpus, cpu, node_selector),
        },
    }
    job: dict[str, Any] = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "MPIJob",
        "metadata": {"name": name},
        "spec": {"slotsPerWorker": 1, "mpiReplicaSpecs": specs},
    }
    if namespace:
        job["metadata"]["namespace"] = namespace
    return job


@dataclasses.dataclass(frozen=True)
class KubeflowKind:
    """How a training-operator kind's manifest is written: its replica specs' field, its roles,
    and the container and port the operator configures (its `*DefaultContainerName`,
    `*DefaultPortName`; its defaulting webhook adds the port in a real cluster, the sandbox runs
    no webhook, so these jobs name it themselves)."""

    field: str
    roles: tuple[str, ...]
    container: str
    port_name: str
    port: int


KUBEFLOW_KINDS: dict[str, KubeflowKind] = {
    "XGBoostJob": KubeflowKind(
        "xgbReplicaSpecs", ("Master", "Worker"), "xgboost", "xgboostjob-port", 9999
    ),
    "PaddleJob": KubeflowKind(
        "paddleReplicaSpecs", ("Master", "Worker"), "paddle", "master", 36543
    ),
    "JAXJob": KubeflowKind("jaxReplicaSpecs", ("Worker",), "jax", "jaxjob-port", 6666),
}


def kubeflow_job(
    kind: str,
    name: str,
    *,
    workers: int = 2,
    gpus: int = 1,
    cpu: str = "1",
    namespace: str | None = None,
    node_selector: dict[str, str] | None = None,
) -> dict[str, Any]:
    """An XGBoostJob, PaddleJob or JAXJob (`kubeflow.org/v1`): a Master when the kind has one,
    and `workers` Workers, `gpus` GPUs each; restartPolicy Never, so one failed pod fails it."""
    shape = KUBEFLOW_KINDS[kind]
    counts = {"Master": 1, "Worker": workers}
    specs: dict[str, Any] = {}
    for role in shape.roles:
        template = _template(gpus, cpu, node_selector)
        main = template["spec"]["containers"][0]
        main["name"] = shape.container
        main["ports"] = [{"name": shape.port_name, "containerPort": shape.port}]
        specs[role] = {"replicas": counts[role], "restartPolicy": "Never", "template": template}
    job: dict[str, Any] = {
        "apiVersion": "kubeflow.org/v1",
        "kind": kind,
        "metadata": {"name": name},
        "spec": {shape.field: specs},
    }
    if namespace:
        job["metadata"]["namespace"] = namespace
    return job


def with_node_selector(job: dict[str, Any], selector: dict[str, str]) -> dict[str, Any]:
    """A copy of a Kubeflow job whose every replica is confined to nodes matching `selector`."""
    out = copy.deepcopy(job)
    spec = out["spec"]
    replica_specs = next(v for k, v in spec.items() if k.endswith("ReplicaSpecs"))
    for replica in replica_specs.values():
        replica["template"].setdefault("spec", {}).setdefault("nodeSelector", {}).update(selector)
    return out


def gang_policy(
    name: str,
    namespace: str,
    *,
    kinds: tuple[str, ...] = ("PyTorchJob",),
    toleration_seconds: int | None = 30,
    purge_mode: str = "Immediately",
    propagate_deps: bool = True,
    estimator: str | None = None,
    scoring: str | None = None,
    max_failovers: int | None = None,
    grace_period_seconds: int | None = None,
    cluster_names: list[str] | None = None,
    gang_schedule_timeout_seconds: int | None = None,
) -> dict[str, Any]:
    """A PropagationPolicy shaped like the seeds' (Gang, Divided, failover on application)."""
    replica_scheduling: dict[str, Any] = {
        "replicaSchedulingType": "Divided",
        "customSchedulingType": "Gang",
    }
    if estimator:
        replica_scheduling["gangEstimator"] = estimator
    if scoring:
        replica_scheduling["gangScoring"] = scoring
    placement: dict[str, Any] = {"replicaScheduling": replica_scheduling}
    if cluster_names:
        placement["clusterAffinity"] = {"clusterNames": cluster_names}
    spec: dict[str, Any] = {
        "propagateDeps": propagate_deps,
        "placement": placement,
        "resourceSelectors": [{"apiVersion": _api_version(k), "kind": k} for k in kinds],
    }
    if toleration_seconds is not None:
        application: dict[str, Any] = {
            "decisionConditions": {"tolerationSeconds": toleration_seconds},
            "purgeMode": purge_mode,
        }
        if max_failovers is not None:
            application["maxFailovers"] = max_failovers
        if grace_period_seconds is not None:
            application["gracePeriodSeconds"] = grace_period_seconds
        if gang_schedule_timeout_seconds is not None:
            application["gangScheduleTimeoutSeconds"] = gang_schedule_timeout_seconds
        spec["failover"] = {"application": application}
    return {
        "apiVersion": "policy.one.alibabacloud.com/v1alpha1",
        "kind": "PropagationPolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def _api_version(kind: str) -> str:
    """The apiVersion fleet dispatches `kind` at (the first adapter's: MPIJob is the training
    operator's kubeflow.org/v1)."""
    return next(a.api_version for a in ADAPTERS if a.kind == kind)


#: The labels each new kind's operator puts on every pod it makes, naming the job.
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
RAY_CLUSTER_LABEL = "ray.io/cluster"
#: The label the Job controller puts on a Job's pods (the RayJob submitter's, for one).
BATCH_JOB_NAME_LABEL = "batch.kubernetes.io/job-name"


def _container(name: str, cpu: str, gpus: int, image: str) -> dict[str, Any]:
    limits: dict[str, Any] = {"cpu": cpu}
    if gpus:
        limits["nvidia.com/gpu"] = gpus
    return {"name": name, "image": image, "resources": {"limits": limits, "requests": limits}}


def jobset(
    name: str,
    *,
    namespace: str | None = None,
    leaders: int = 1,
    workers: int = 2,
    worker_pods: int = 2,
    gpus: int = 1,
    cpu: str = "1",
    restart_policy: str = "Never",
    node_selector: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A JobSet (jobset.x-k8s.io/v1alpha2): a `leader` replicated job of `leaders` one-pod
    Jobs and a `worker` one of `workers` Jobs with `worker_pods` pods each."""

    def replicated(rname: str, replicas: int, pods: int) -> dict[str, Any]:
        return {
            "name": rname,
            "replicas": replicas,
            "template": {
                "spec": {
                    "parallelism": pods,
                    "completions": pods,
                    "backoffLimit": 0,
                    "template": {
                        "spec": {
                            "restartPolicy": restart_policy,
                            "containers": [
                                _container("trainer", cpu, gpus, "docker.io/library/busybox:1.36")
                            ],
                            **({"nodeSelector": dict(node_selector)} if node_selector else {}),
                        }
                    },
                }
            },
        }

    job: dict[str, Any] = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name},
        "spec": {
            "replicatedJobs": [
                replicated("leader", leaders, 1),
                replicated("worker", workers, worker_pods),
            ]
        },
    }
    if namespace:
        job["metadata"]["namespace"] = namespace
    return job


def _staged_job(
    rname: str,
    pods: int | None,
    container: dict[str, Any],
    node_selector: dict[str, str] | None,
    depends_on: list[tuple[str, str]] | None = None,
    backoff_limit: int | None = None,
) -> dict[str, Any]:
    """One replicated job of a staged JobSet, as JobSet's examples write them (one Job, no
    `replicas`): `pods` sets parallelism and completions, None leaves them unset (one pod)."""
    job_spec: dict[str, Any] = {
        "template": {
            "spec": {
                "containers": [container],
                **({"nodeSelector": dict(node_selector)} if node_selector else {}),
            }
        }
    }
    if backoff_limit is not None:
        job_spec = {"backoffLimit": backoff_limit, **job_spec}
    if pods is not None:
        job_spec = {"parallelism": pods, "completions": pods, **job_spec}
    out: dict[str, Any] = {"name": rname, "template": {"spec": job_spec}}
    if depends_on:
        out["dependsOn"] = [{"name": n, "status": status} for n, status in depends_on]
    return out


def _staged(name: str, namespace: str | None, spec: dict[str, Any]) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": meta,
        "spec": spec,
    }


def jobset_in_order(
    name: str = "startup-driver-ready",
    *,
    namespace: str | None = None,
    gpus: int = 1,
    node_selector: dict[str, str] | None = None,
) -> dict[str, Any]:
    """JobSet's `examples/startup-policy/startup-driver-ready.yaml` (v0.10.1):
    `startupPolicyOrder: InOrder`, a `driver` (1 pod, with a readiness probe), then `workers`
    (4 pods) once the driver is ready; each pod asks for `gpus` GPUs (and 100m CPU)."""
    driver = _container("sleep", "100m", gpus, "docker.io/library/busybox:1.36")
    driver |= {
        "command": ["sleep"],
        "args": ["1000s"],
        "readinessProbe": {"exec": {"command": ["echo", "ready"]}, "initialDelaySeconds": 30},
    }
    worker = _container("sleep", "100m", gpus, "docker.io/library/busybox:1.36")
    worker |= {"command": ["sleep"], "args": ["100s"]}
    return _staged(
        name,
        namespace,
        {
            "startupPolicy": {"startupPolicyOrder": "InOrder"},
            "replicatedJobs": [
                _staged_job("driver", 1, driver, node_selector, backoff_limit=0),
                _staged_job("workers", 4, worker, node_selector, backoff_limit=0),
            ],
        },
    )


def jobset_depends_on(
    name: str = "depends-on",
    *,
    namespace: str | None = None,
    gpus: int = 1,
    node_selector: dict[str, str] | None = None,
) -> dict[str, Any]:
    """JobSet's `examples/depends-on/depends-on.yaml` (v0.10.1): an `initializer` (1 pod), a
    `launcher` (1 pod, with a startup probe) once the initializer is Complete, and a `worker`
    (4 pods) once the launcher is Ready; each pod asks for `gpus` GPUs (and 100m CPU)."""

    def container(what: str, seconds: int) -> dict[str, Any]:
        out = _container(what, "100m", gpus, "docker.io/library/busybox:1.36")
        out["command"] = [
            "/bin/sh",
            "-c",
            f"echo '{what} runs for {seconds} seconds' && sleep {seconds}",
        ]
        return out

    launcher = container("launcher", 20)
    launcher["startupProbe"] = {"exec": {"command": ["echo", "started"]}, "initialDelaySeconds": 5}
    return _staged(
        name,
        namespace,
        {
            "replicatedJobs": [
                _staged_job("initializer", None, container("initializer", 10), node_selector),
                _staged_job(
                    "launcher", None, launcher, node_selector, [("initializer", "Complete")]
                ),
                _staged_job(
                    "worker", 4, container("worker", 20), node_selector, [("launcher", "Ready")]
                ),
            ]
        },
    )


def training_runtime(
    name: str,
    *,
    namespace: str | None = None,
    cluster: bool = False,
    gpus: int = 1,
    cpu: str = "1",
    coscheduling: bool = True,
    node_selector: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A Trainer v2 (Cluster)TrainingRuntime for PyTorch: one `node` replicated job whose pods
    are the trainer nodes (numNodes, from the TrainJob), gang-scheduled by scheduler-plugins
    coscheduling when `coscheduling`."""
    spec: dict[str, Any] = {
        "mlPolicy": {"numNodes": 1, "torch": {"numProcPerNode": "auto"}},
        "template": {
            "spec": {
                "replicatedJobs": [
                    {
                        "name": "node",
                        "replicas": 1,
                        "template": {
                            "metadata": {
                                "labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}
                            },
                            "spec": {
                                # a failed node fails the job at once (no pod retries)
                                "backoffLimit": 0,
                                "template": {
                                    "spec": {
                                        "restartPolicy": "Never",
                                        **(
                                            {"nodeSelector": dict(node_selector)}
                                            if node_selector
                                            else {}
                                        ),
                                        "containers": [
                                            {
                                                **_container(
                                                    "node",
                                                    cpu,
                                                    gpus,
                                                    "docker.io/pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime",
                                                ),
                                                "command": ["torchrun", "/workspace/train.py"],
                                            }
                                        ],
                                    }
                                },
                            },
                        },
                    }
                ]
            }
        },
    }
    if coscheduling:
        spec["podGroupPolicy"] = {"coscheduling": {"scheduleTimeoutSeconds": 120}}
    runtime: dict[str, Any] = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime" if cluster else "TrainingRuntime",
        "metadata": {"name": name},
        "spec": spec,
    }
    if namespace and not cluster:
        runtime["metadata"]["namespace"] = namespace
    return runtime


def trainjob(
    name: str,
    runtime: str,
    *,
    namespace: str | None = None,
    nodes: int = 2,
    cluster_runtime: bool = False,
) -> dict[str, Any]:
    """A Trainer v2 TrainJob on `nodes` trainer nodes of the named runtime."""
    job: dict[str, Any] = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {
            "runtimeRef": {
                "apiGroup": "trainer.kubeflow.org",
                "kind": "ClusterTrainingRuntime" if cluster_runtime else "TrainingRuntime",
                "name": runtime,
            },
            "trainer": {"numNodes": nodes},
        },
    }
    if namespace:
        job["metadata"]["namespace"] = namespace
    return job


_RAY_IMAGE = "docker.io/rayproject/ray:2.46.0"


def _ray_cluster_spec(
    workers: int, gpus: int, cpu: str, node_selector: dict[str, str] | None = None
) -> dict[str, Any]:
    head = _container("ray-head", cpu, 0, _RAY_IMAGE)
    worker = _container("ray-worker", cpu, gpus, _RAY_IMAGE)
    extra = {"nodeSelector": dict(node_selector)} if node_selector else {}
    return {
        "headGroupSpec": {
            "rayStartParams": {},
            "template": {"spec": {"containers": [head], **extra}},
        },
        "workerGroupSpecs": [
            {
                "groupName": "workers",
                "replicas": workers,
                "minReplicas": workers,
                "maxReplicas": workers,
                "rayStartParams": {},
                "template": {"spec": {"containers": [worker], **extra}},
            }
        ],
    }


def raycluster(
    name: str,
    *,
    namespace: str | None = None,
    workers: int = 2,
    gpus: int = 1,
    cpu: str = "1",
    node_selector: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A RayCluster (ray.io/v1): a head and one worker group of `workers` pods."""
    cluster: dict[str, Any] = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name},
        "spec": _ray_cluster_spec(workers, gpus, cpu, node_selector),
    }
    if namespace:
        cluster["metadata"]["namespace"] = namespace
    return cluster


def rayjob(
    name: str,
    *,
    namespace: str | None = None,
    workers: int = 2,
    gpus: int = 1,
    cpu: str = "1",
    submitter_backoff_limit: int = 0,
    node_selector: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A RayJob (ray.io/v1): its own RayCluster (a head and `workers` workers) and an
    entrypoint the operator submits from a submitter Job once the cluster is ready. The
    submitter gets no retries by default: the first failed submission fails the RayJob."""
    job: dict[str, Any] = {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": name},
        "spec": {
            "entrypoint": "python -c 'import ray; ray.init(); print(ray.cluster_resources())'",
            "shutdownAfterJobFinishes": True,
            "submitterConfig": {"backoffLimit": submitter_backoff_limit},
            "rayClusterSpec": _ray_cluster_spec(workers, gpus, cpu, node_selector),
        },
    }
    if namespace:
        job["metadata"]["namespace"] = namespace
    return job
