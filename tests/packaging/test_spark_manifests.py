"""The load job's manifests (manifests/spark): what kustomize renders is valid for Kubernetes,
the ScheduledSparkApplication runs the job the Spark image carries with arguments the job
takes, and its service accounts may do what the job needs and no more."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import yaml
from rendered_manifests import MANIFESTS, ROOT, Object, find, kustomize, pod_spec, rendered

from scalable_topics.cli import build_parser as broker_parser
from scalable_topics.loadjob.cli import parser

NAMESPACE = "scalable-topics"
JOB = "scalable-topics-load-job"
HISTORY_CLAIM = "scalable-topics-load-history"
BROKER = "scalable-topics-broker"
KUBERNETES_VERSION = "1.37"


def _rendered() -> list[Object]:
    done = kustomize(MANIFESTS / "spark")
    assert done.returncode == 0, done.stderr
    return [obj for obj in yaml.safe_load_all(done.stdout) if obj]


def _application() -> Object:
    return find(_rendered(), "ScheduledSparkApplication", JOB)


def test_built_in_kinds_are_valid_and_everything_is_in_the_system_namespace() -> None:
    objects = _rendered()
    kinds = sorted(o["kind"] for o in objects)
    assert kinds == sorted(
        [
            "ServiceAccount",
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",
            "ScheduledSparkApplication",
        ]
    )
    for obj in objects:
        if obj["kind"] != "ScheduledSparkApplication":
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        cluster_scoped = obj["kind"] in ("ClusterRole", "ClusterRoleBinding")
        assert obj["metadata"].get("namespace") == (None if cluster_scoped else NAMESPACE)


def test_the_schedule_runs_the_job_of_the_spark_image_one_run_at_a_time() -> None:
    spec = _application()
    assert spec["apiVersion"] == "sparkoperator.k8s.io/v1beta2"
    assert spec["spec"]["schedule"] == "@every 1m"
    assert spec["spec"]["concurrencyPolicy"] == "Forbid"
    assert spec["spec"]["successfulRunHistoryLimit"] >= 1
    assert spec["spec"]["failedRunHistoryLimit"] >= 1
    app = spec["spec"]["template"]
    assert (app["type"], app["pythonVersion"], app["mode"]) == ("Python", "3", "cluster")
    # The entry script is the repository's spark/, which the image copies to that directory.
    main = app["mainApplicationFile"]
    assert main == "local:///opt/scalable-topics/spark/evaluate_load.py"
    assert (ROOT / "spark" / "evaluate_load.py").is_file()
    dockerfile = (ROOT / "Dockerfile.spark").read_text()
    assert "COPY spark /opt/scalable-topics/spark" in dockerfile
    # The Spark version is the image's.
    [version] = set(re.findall(r"FROM apache/spark:(\d+\.\d+\.\d+)-python3", dockerfile))
    assert app["sparkVersion"] == version


def test_the_arguments_are_ones_the_job_takes() -> None:
    app = _application()["spec"]["template"]
    args = parser().parse_args(app["arguments"])
    assert args.store == "kubernetes:in-cluster"
    assert args.every is None  # one run per scheduled application
    assert args.system_namespace == NAMESPACE
    # Fresh for three runs of the schedule, so one missed run leaves the controller one.
    assert args.ttl == 180


def test_driver_and_executors_mount_the_history_where_the_job_reads_it() -> None:
    app = _application()["spec"]["template"]
    history = parser().parse_args(app["arguments"]).history
    [volume] = app["volumes"]
    assert volume["persistentVolumeClaim"]["claimName"] == HISTORY_CLAIM
    for role in ("driver", "executor"):
        mounts = app[role]["volumeMounts"]
        assert mounts == [{"name": volume["name"], "mountPath": history, "readOnly": True}]


def test_production_brokers_write_the_history_the_job_reads() -> None:
    """The job defines no claim: the production overlay does, and its brokers write their load
    history on it at the very path the job reads it from, so that both name one directory."""
    app = _application()["spec"]["template"]
    history = parser().parse_args(app["arguments"]).history
    [job_volume] = app["volumes"]
    [job_mount] = app["driver"]["volumeMounts"]
    objects = rendered("production")
    claim = find(objects, "PersistentVolumeClaim", HISTORY_CLAIM)
    assert claim["metadata"]["namespace"] == NAMESPACE
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]  # brokers on every node write it
    brokers = pod_spec(find(objects, "StatefulSet", BROKER))
    [volume] = [
        v
        for v in brokers["volumes"]
        if v.get("persistentVolumeClaim", {}).get("claimName")
        == job_volume["persistentVolumeClaim"]["claimName"]
    ]
    [container] = brokers["containers"]
    [mount] = [m for m in container["volumeMounts"] if m["name"] == volume["name"]]
    assert mount.get("subPath") == job_mount.get("subPath")
    written = broker_parser().parse_args(container["args"]).load_history
    assert written == mount["mountPath"] == history


def _restricted(pod: dict[str, Any], container: dict[str, Any]) -> None:
    assert pod["runAsNonRoot"] is True and pod["runAsUser"] == 185
    assert pod["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["allowPrivilegeEscalation"] is False
    assert container["capabilities"] == {"drop": ["ALL"]}


def test_pods_meet_the_system_namespaces_restricted_pod_security() -> None:
    app = _application()["spec"]["template"]
    for role in ("driver", "executor"):
        _restricted(app[role]["podSecurityContext"], app[role]["securityContext"])


def _grants(role: Object) -> dict[tuple[str, str], set[str]]:
    grants: dict[tuple[str, str], set[str]] = {}
    for rule in role["rules"]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                grants.setdefault((group, resource), set()).update(rule["verbs"])
    return grants


def test_the_driver_reads_topics_writes_only_their_status_and_runs_its_executors() -> None:
    objects = _rendered()
    app = find(objects, "ScheduledSparkApplication", JOB)["spec"]["template"]
    assert app["driver"]["serviceAccount"] == JOB
    assert _grants(find(objects, "ClusterRole", JOB)) == {
        ("scalabletopics.dev", "scalabletopics"): {"get", "list", "watch"},
        ("scalabletopics.dev", "scalabletopics/status"): {"patch"},
    }
    # In the system namespace: the autoscale ConfigMap, and Spark's own executor objects.
    local = _grants(find(objects, "Role", JOB))
    assert set(local) == {("", "configmaps"), ("", "pods"), ("", "services")}
    assert {"get", "list", "watch"} <= local["", "configmaps"]
    assert not any("update" in verbs or "patch" in verbs for verbs in local.values())
    subject = [{"kind": "ServiceAccount", "name": JOB, "namespace": NAMESPACE}]
    for kind, role_kind in (("ClusterRoleBinding", "ClusterRole"), ("RoleBinding", "Role")):
        binding = find(objects, kind, JOB)
        assert binding["subjects"] == subject
        assert binding["roleRef"]["kind"] == role_kind and binding["roleRef"]["name"] == JOB


def test_executors_have_no_api_rights_and_no_token() -> None:
    objects = _rendered()
    app = find(objects, "ScheduledSparkApplication", JOB)["spec"]["template"]
    account = app["executor"]["serviceAccount"]
    assert account != JOB
    assert find(objects, "ServiceAccount", account)["automountServiceAccountToken"] is False
    bound = [
        s["name"]
        for o in objects
        if o["kind"] in ("RoleBinding", "ClusterRoleBinding")
        for s in o["subjects"]
    ]
    assert account not in bound


def test_every_rule_names_the_code_that_needs_it() -> None:
    text = (MANIFESTS / "spark" / "load-job-rbac.yaml").read_text()
    for module in re.findall(r"\b(loadjob/\w+\.py)\b", text):
        assert (ROOT / "operator" / "scalable_topics" / module).is_file(), module
    blocks = text.split("- apiGroups:")[1:]
    above = text.split("- apiGroups:")
    for index in range(len(blocks)):
        comment = above[index].rsplit("rules:", 1)[-1]
        assert "loadjob/" in comment or "Spark's driver" in comment, blocks[index][:60]


def test_an_overlay_names_the_spark_image_as_it_names_any_other(tmp_path: Path) -> None:
    assert _application()["spec"]["template"]["image"] == "scalable-topics-spark:dev"
    (tmp_path / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "resources": [os.path.relpath(MANIFESTS / "spark", tmp_path)],
                "images": [
                    {
                        "name": "scalable-topics-spark",
                        "newName": "registry.example.com/scalable-topics-spark",
                        "newTag": "0.1.0",
                    }
                ],
            }
        )
    )
    done = kustomize(tmp_path)
    assert done.returncode == 0, done.stderr
    objects = [obj for obj in yaml.safe_load_all(done.stdout) if obj]
    app = find(objects, "ScheduledSparkApplication", JOB)["spec"]["template"]
    assert app["image"] == "registry.example.com/scalable-topics-spark:0.1.0"
