# ruff: noqa: E501 - the YAML is quoted verbatim from the seeds
"""The workloads of the ACK seed documents (shared/seeds), as the API would return them."""

from __future__ import annotations

from typing import Any

import yaml

# 000_/002_: the TFJob gang example (1 PS with a cpu limit of 1, 4 Workers with 2 GPUs each).
TFJOB_YAML = """
apiVersion: "kubeflow.org/v1"
kind: "TFJob"
metadata:
  name: "tf-smoke-gpu"
spec:
  tfReplicaSpecs:
    PS:
      replicas: 1
      template:
        metadata:
          creationTimestamp: null
          labels:
            pod-group.scheduling.sigs.k8s.io/name: tf-smoke-gpu
            pod-group.scheduling.sigs.k8s.io/min-available: "5"
        spec:
          containers:
          - args: [python, tf_cnn_benchmarks.py, --device=cpu]
            image: registry.cn-hangzhou.aliyuncs.com/kubeflow-images-public/tf-benchmarks-cpu:v20171202-bdab599-dirty-284af3
            name: tensorflow
            ports:
            - containerPort: 2222
              name: tfjob-port
            resources:
              limits:
                cpu: '1'
            workingDir: /opt/tf-benchmarks/scripts/tf_cnn_benchmarks
          restartPolicy: OnFailure
    Worker:
      replicas: 4
      template:
        metadata:
          creationTimestamp: null
          labels:
            pod-group.scheduling.sigs.k8s.io/name: tf-smoke-gpu
            pod-group.scheduling.sigs.k8s.io/min-available: "5"
        spec:
          containers:
          - args: [python, tf_cnn_benchmarks.py, --device=gpu]
            image: registry.cn-hangzhou.aliyuncs.com/kubeflow-images-public/tf-benchmarks-gpu:v20171202-bdab599-dirty-284af3
            name: tensorflow
            ports:
            - containerPort: 2222
              name: tfjob-port
            resources:
              limits:
                nvidia.com/gpu: 2
            workingDir: /opt/tf-benchmarks/scripts/tf_cnn_benchmarks
          restartPolicy: OnFailure
"""

# 001_: the fleet PyTorchJob (1 master + 2 workers). The seed shows only its outputs; this is the
# usual ACK example body with those replica counts.
PYTORCHJOB_YAML = """
apiVersion: "kubeflow.org/v1"
kind: PyTorchJob
metadata:
  name: pytorch-test
  namespace: default
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      restartPolicy: Never
      template:
        spec:
          containers:
          - name: pytorch
            image: registry.cn-hangzhou.aliyuncs.com/acs/pytorch-with-tensorboard:1.5.1-cuda10.1-cudnn7-runtime
            command: [python, /root/code/mnist-pytorch/mnist.py, --backend, gloo]
            resources:
              limits:
                cpu: 500m
              requests:
                cpu: 500m
    Worker:
      replicas: 2
      restartPolicy: Never
      template:
        spec:
          containers:
          - name: pytorch
            image: registry.cn-hangzhou.aliyuncs.com/acs/pytorch-with-tensorboard:1.5.1-cuda10.1-cudnn7-runtime
            command: [python, /root/code/mnist-pytorch/mnist.py, --backend, gloo]
            resources:
              limits:
                cpu: 500m
              requests:
                cpu: 500m
"""


def tfjob() -> dict[str, Any]:
    return dict(yaml.safe_load(TFJOB_YAML))


def pytorchjob() -> dict[str, Any]:
    return dict(yaml.safe_load(PYTORCHJOB_YAML))
