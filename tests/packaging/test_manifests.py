"""The Kubernetes manifests (manifests/): kustomize renders the base and each overlay, every
object is valid for Kubernetes, and the objects hold what a reviewer would check by hand."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from rendered_manifests import (
    MANIFESTS,
    OVERLAYS,
    TARGETS,
    Object,
    containers,
    custom_kinds,
    examples,
    find,
    flag,
    of_kind,
    pod_spec,
    project_version,
    rendered,
    strict_schema,
    workloads,
)

from scalable_topics.cli import build_parser
from scalable_topics.commands.controller import controller_config
from scalable_topics.model.resources import ScalableTopic
from scalable_topics.tokens import load_private_key, public_pem

# The Kubernetes release the manifests are validated against: the kubectl of the dev extra.
KUBERNETES_VERSION = "1.37"
NAMESPACE = "scalable-topics"
NON_ROOT_UID = 10001  # the Dockerfile's user
TOKEN_SECRET = "scalable-topics-cluster-token"
TOKEN_KEY_CONFIGMAP = "scalable-topics-token-key"
OPERATOR, BROKER = "scalable-topics-operator", "scalable-topics-broker"
HISTORY_CLAIM = "scalable-topics-load-history"


def _validate(obj: Object) -> None:
    """Validate strictly (unknown fields are errors) against the Kubernetes schemas. Only
    instances of this project's CRDs may lack a schema there; they are checked against the
    CRD's own schema instead."""
    try:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.SchemaNotFoundError:
        schema = custom_kinds().get((obj["apiVersion"], obj["kind"]))
        assert schema is not None, f"{obj['apiVersion']} {obj['kind']} is not a Kubernetes kind"
        jsonschema.validate(obj, strict_schema(schema))
    except kubernetes_validate.ValidationError as error:
        where = ".".join(str(part) for part in error.path)
        name = f"{obj['kind']} {obj['metadata'].get('name')}"
        raise AssertionError(f"{name}: {where}: {error.message}") from None


# -- rendering and validity ----------------------------------------------------------------------


@pytest.mark.parametrize("target", TARGETS)
def test_kustomize_renders_distinct_named_objects(target: str) -> None:
    objects = rendered(target)
    keys = [(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in objects]
    assert len(keys) == len(set(keys)), "an object is defined twice"
    kinds = {o["kind"] for o in objects}
    assert {"Namespace", "CustomResourceDefinition", "Deployment", "StatefulSet"} <= kinds


@pytest.mark.parametrize("target", TARGETS)
def test_every_object_is_valid_for_kubernetes(target: str) -> None:
    for obj in rendered(target):
        _validate(obj)


@pytest.mark.parametrize("target", TARGETS)
def test_namespaced_objects_are_in_the_system_namespace(target: str) -> None:
    cluster_scoped = {"Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding"}
    for obj in rendered(target):
        expected = None if obj["kind"] in cluster_scoped else NAMESPACE
        assert obj["metadata"].get("namespace") == expected, obj["metadata"]["name"]
    namespace = find(rendered(target), "Namespace", NAMESPACE)
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


def test_validation_refuses_an_unknown_field_and_a_wrong_type() -> None:
    """The strict validation above is not vacuous."""
    operator = find(rendered("base"), "Deployment", OPERATOR)
    pod_spec(operator)["containers"][0]["securityContext"]["runAsNonRot"] = True
    with pytest.raises(AssertionError, match="runAsNonRot"):
        _validate(operator)
    broker = find(rendered("base"), "StatefulSet", BROKER)
    broker["spec"]["replicas"] = "three"
    with pytest.raises(AssertionError, match="replicas"):
        _validate(broker)


@pytest.mark.parametrize("path", examples(), ids=lambda p: p.name)
def test_examples_are_valid_topics(path: Path) -> None:
    """Kubernetes knows no ScalableTopic schema: the CRD's schema checks it (unknown fields
    refused, as kubectl's strict field validation does), and the model checks the CEL rules."""
    topic = yaml.safe_load(path.read_text())
    with pytest.raises(kubernetes_validate.SchemaNotFoundError):
        kubernetes_validate.validate(topic, KUBERNETES_VERSION, strict=True)
    _validate(topic)
    ScalableTopic.model_validate(topic)


def test_the_examples_include_an_autoscale_policy() -> None:
    specs = [yaml.safe_load(p.read_text())["spec"] for p in examples()]
    assert len(specs) >= 3
    assert any("splitThresholds" in s.get("autoScale", {}) for s in specs)
    assert any("mergeThresholds" in s.get("autoScale", {}) for s in specs)


def test_an_example_with_a_misspelt_field_is_refused() -> None:
    topic = yaml.safe_load(examples()[0].read_text())
    topic["spec"]["autoscale"] = topic["spec"].pop("autoScale", {})
    with pytest.raises(jsonschema.ValidationError, match="autoscale"):
        _validate(topic)


# -- pods ------------------------------------------------------------------------------------------


def _effective(workload: Object, container: Object, field: str) -> Any:
    """A securityContext field as the kubelet applies it: the container's, else the pod's."""
    own = container.get("securityContext", {})
    return own[field] if field in own else pod_spec(workload).get("securityContext", {}).get(field)


@pytest.mark.parametrize("target", TARGETS)
def test_every_container_runs_locked_down(target: str) -> None:
    found = workloads(rendered(target))
    assert {w["metadata"]["name"] for w in found} == {OPERATOR, BROKER}
    for workload in found:
        for container in containers(workload):
            name = f"{workload['metadata']['name']}/{container['name']}"
            own = container.get("securityContext", {})
            assert _effective(workload, container, "runAsNonRoot") is True, name
            assert _effective(workload, container, "runAsUser") == NON_ROOT_UID, name
            assert own.get("readOnlyRootFilesystem") is True, name
            assert own.get("allowPrivilegeEscalation") is False, name
            assert "ALL" in own.get("capabilities", {}).get("drop", []), name
            assert not own.get("capabilities", {}).get("add"), name
            assert not own.get("privileged"), name
            seccomp = _effective(workload, container, "seccompProfile") or {}
            assert seccomp.get("type") == "RuntimeDefault", name
            limits = container.get("resources", {}).get("limits", {})
            requests = container.get("resources", {}).get("requests", {})
            assert {"cpu", "memory"} <= requests.keys() and "memory" in limits, name


@pytest.mark.parametrize("target", TARGETS)
def test_variables_in_args_are_defined(target: str) -> None:
    """The kubelet expands $(NAME) only for variables the container defines; any other is
    passed on literally."""
    for workload in workloads(rendered(target)):
        for container in containers(workload):
            defined = {env["name"] for env in container.get("env", [])}
            for arg in container.get("args", []):
                for name in re.findall(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", arg):
                    assert name in defined, f"{container['name']}: {arg} uses undefined {name}"


@pytest.mark.parametrize("target", TARGETS)
def test_args_are_flags_stctl_takes_and_configurations_it_accepts(target: str) -> None:
    """Each container's args parse with stctl's own parser (variables given sample values),
    and the controller configuration they describe is one the operator would start with."""
    samples = {"POD_IP": "10.0.0.7", "POD_NAME": "broker-0", "POD_NAMESPACE": "scalable-topics"}
    for workload in workloads(rendered(target)):
        for container in containers(workload):
            args = [
                re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: samples[m.group(1)], arg)
                for arg in container.get("args", [])
            ]
            try:
                parsed = build_parser().parse_args(args)
            except SystemExit:
                pytest.fail(f"{container['name']}: stctl refuses {args}")
            if args[0] == "operator":
                parsed.auth_token_file = None  # a mounted Secret, not here
                config = controller_config(parsed)
                assert config.endpoint == "http://10.0.0.7:6651"
                assert config.system_namespace == "scalable-topics"


def _ports(container: Object) -> dict[str, int]:
    return {p["name"]: p["containerPort"] for p in container.get("ports", [])}


def _listened(container: Object) -> set[int]:
    """The ports the container's process listens on, from its flags."""
    ports = set()
    for name in ("listen", "health-listen"):
        value = flag(container, name)
        if value is not None:
            ports.add(int(value.rpartition(":")[2]))
    port = flag(container, "port")
    if port is not None:
        ports.add(int(port))
    return ports


@pytest.mark.parametrize("target", TARGETS)
def test_probes_and_ports_are_the_ones_the_process_listens_on(target: str) -> None:
    for workload in workloads(rendered(target)):
        for container in containers(workload):
            ports = _ports(container)
            assert set(ports.values()) == _listened(container), container["name"]
            probes = [
                k for k in ("livenessProbe", "readinessProbe", "startupProbe") if k in container
            ]
            assert {"livenessProbe", "readinessProbe"} <= set(probes), container["name"]
            for kind in probes:
                port = container[kind]["httpGet"]["port"]
                declared = port in ports if isinstance(port, str) else port in ports.values()
                assert declared, f"{container['name']} {kind} probes undeclared port {port}"


def test_the_probes_are_the_documented_endpoints() -> None:
    objects = rendered("base")
    [operator] = find(objects, "Deployment", OPERATOR)["spec"]["template"]["spec"]["containers"]
    assert operator["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert operator["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "controller"}
    assert _ports(operator) == {"controller": 6651, "health": 8080}
    [broker] = find(objects, "StatefulSet", BROKER)["spec"]["template"]["spec"]["containers"]
    for kind in ("livenessProbe", "readinessProbe", "startupProbe"):
        assert broker[kind]["httpGet"] == {"path": "/healthz", "port": "broker"}
    assert _ports(broker) == {"broker": 6650}


@pytest.mark.parametrize("target", TARGETS)
def test_operator_runs_two_replicas_with_a_disruption_budget(target: str) -> None:
    objects = rendered(target)
    operator = find(objects, "Deployment", OPERATOR)
    assert operator["spec"]["replicas"] == 2
    [container] = pod_spec(operator)["containers"]
    assert container["args"][0] == "operator"
    assert flag(container, "endpoint") == "http://$(POD_IP):6651"
    pod_ip = {e["name"]: e.get("valueFrom") for e in container["env"]}["POD_IP"]
    assert pod_ip == {"fieldRef": {"fieldPath": "status.podIP"}}
    budget = find(objects, "PodDisruptionBudget", OPERATOR)
    assert budget["spec"]["maxUnavailable"] == 1
    assert budget["spec"]["selector"] == operator["spec"]["selector"]
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert "/tmp" in mounts, "kubernetes_asyncio and kopf need a writable /tmp"


@pytest.mark.parametrize("target", TARGETS)
def test_brokers_are_a_stateful_set_with_volumes_and_a_headless_service(target: str) -> None:
    objects = rendered(target)
    brokers = find(objects, "StatefulSet", BROKER)
    spec = brokers["spec"]
    assert spec["replicas"] == 3 and spec["podManagementPolicy"] == "Parallel"
    [claim] = spec["volumeClaimTemplates"]
    assert claim["metadata"]["name"] == "data"
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    [container] = pod_spec(brokers)["containers"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts["data"] == flag(container, "data-dir") == "/var/lib/scalable-topics"
    assert flag(container, "store") == "kubernetes:in-cluster"
    assert flag(container, "broker-id") == "$(POD_NAME)"
    headless = find(objects, "Service", spec["serviceName"])
    assert headless["spec"]["clusterIP"] == "None"
    assert headless["spec"]["publishNotReadyAddresses"] is True
    # Each broker registers under its pod's DNS name in that Service.
    assert flag(container, "advertised-url") == (
        f"ws://$(POD_NAME).{spec['serviceName']}.$(POD_NAMESPACE).svc:6650"
    )
    assert find(objects, "PodDisruptionBudget", BROKER)["spec"]["maxUnavailable"] == 1


@pytest.mark.parametrize("target", TARGETS)
def test_services_select_pods_and_their_named_ports(target: str) -> None:
    objects = rendered(target)
    pods = {w["metadata"]["name"]: w for w in workloads(objects)}
    expected = {
        "scalable-topics": BROKER,
        "scalable-topics-brokers": BROKER,
        "scalable-topics-controller": OPERATOR,
    }
    services = {s["metadata"]["name"]: s for s in of_kind(objects, "Service")}
    assert services.keys() == expected.keys()
    for name, service in services.items():
        workload = pods[expected[name]]
        labels = workload["spec"]["template"]["metadata"]["labels"]
        assert service["spec"]["selector"].items() <= labels.items(), name
        [container] = pod_spec(workload)["containers"]
        for port in service["spec"]["ports"]:
            assert port["targetPort"] in _ports(container), f"{name}: {port['targetPort']}"


@pytest.mark.parametrize("target", TARGETS)
def test_both_components_share_the_system_namespace_and_the_token(target: str) -> None:
    """The Leases live where the Roles allow them, and every process reads one token file."""
    for workload in workloads(rendered(target)):
        [container] = pod_spec(workload)["containers"]
        assert flag(container, "system-namespace") == "$(POD_NAMESPACE)"
        env = {e["name"]: e.get("valueFrom") for e in container["env"]}
        assert env["POD_NAMESPACE"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
        token = flag(container, "auth-token-file")
        mounts = {m["name"]: m for m in container["volumeMounts"]}
        assert token == f"{mounts['token']['mountPath']}/token" and mounts["token"]["readOnly"]
        volumes = {v["name"]: v for v in pod_spec(workload)["volumes"]}
        assert volumes["token"]["secret"]["items"] == [{"key": "token", "path": "token"}]


# -- images and the token Secret per overlay --------------------------------------------------------


def _images(objects: list[Object]) -> set[tuple[str, str | None]]:
    return {
        (c["image"], c.get("imagePullPolicy")) for w in workloads(objects) for c in containers(w)
    }


def test_kind_runs_the_locally_built_image() -> None:
    assert _images(rendered("kind")) == {("scalable-topics:dev", "IfNotPresent")}


def test_production_runs_the_released_image_of_this_version() -> None:
    image = f"registry.example.com/scalable-topics:{project_version()}"
    assert _images(rendered("production")) == {(image, "IfNotPresent")}


def _secret_references(objects: list[Object]) -> set[tuple[str, str]]:
    """(Secret name, key) for every Secret a pod reads, by volume or environment variable."""
    found = set()
    for workload in workloads(objects):
        for volume in pod_spec(workload).get("volumes", []):
            if "secret" in volume:
                for item in volume["secret"]["items"]:
                    found.add((volume["secret"]["secretName"], item["key"]))
        for container in containers(workload):
            for env in container.get("env", []):
                ref = env.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    found.add((ref["name"], ref["key"]))
    return found


def test_kind_generates_the_token_secret_the_pods_read() -> None:
    objects = rendered("kind")
    references = _secret_references(objects)
    assert {key for _, key in references} == {"token"}
    for name, key in references:
        assert name.startswith(f"{TOKEN_SECRET}-"), name  # with the generator's content hash
        secret = find(objects, "Secret", name)
        assert key in secret.get("data", {}) or key in secret.get("stringData", {})


@pytest.mark.parametrize("target", ["base", "production"])
def test_production_creates_no_secret(target: str) -> None:
    objects = rendered(target)
    assert of_kind(objects, "Secret") == []
    assert _secret_references(objects) == {(TOKEN_SECRET, "token")}


def _token_key_references(objects: list[Object]) -> set[str]:
    """The ConfigMaps the brokers read the client token key from."""
    return {
        volume["configMap"]["name"]
        for workload in workloads(objects)
        for volume in pod_spec(workload).get("volumes", [])
        if "configMap" in volume and volume["name"] == "token-key"
    }


@pytest.mark.parametrize("target", TARGETS)
def test_brokers_verify_client_tokens_with_the_mounted_public_key(target: str) -> None:
    [broker] = [w for w in workloads(rendered(target)) if w["kind"] == "StatefulSet"]
    [container] = pod_spec(broker)["containers"]
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    expected = f"{mounts['token-key']['mountPath']}/token.pub"
    assert flag(container, "token-public-key") == expected and mounts["token-key"]["readOnly"]
    volumes = {v["name"]: v for v in pod_spec(broker)["volumes"]}
    assert volumes["token-key"]["configMap"]["items"] == [{"key": "token.pub", "path": "token.pub"}]


def test_kind_generates_the_token_key_from_the_development_pair() -> None:
    """The ConfigMap holds the public half of the development key committed beside the
    overlay, so tokens issued with it are accepted by the kind cluster's brokers."""
    objects = rendered("kind")
    [name] = _token_key_references(objects)
    assert name.startswith(f"{TOKEN_KEY_CONFIGMAP}-")
    public = find(objects, "ConfigMap", name)["data"]["token.pub"].encode()
    private = load_private_key(MANIFESTS / "overlays" / "kind" / "development-token.key")
    assert public == public_pem(private)


@pytest.mark.parametrize("target", ["base", "production"])
def test_production_creates_no_token_key(target: str) -> None:
    objects = rendered(target)
    assert of_kind(objects, "ConfigMap") == []
    assert _token_key_references(objects) == {TOKEN_KEY_CONFIGMAP}


def _without_overlay_changes(obj: Object) -> Object:
    """``obj`` without what the overlays set: images, resources, the token Secret's name (the
    kind overlay generates it with a content hash)."""
    if obj["kind"] in ("Deployment", "StatefulSet"):
        for container in containers(obj):
            del container["image"], container["resources"]
        for volume in pod_spec(obj)["volumes"]:
            if "secret" in volume:
                volume["secret"]["secretName"] = TOKEN_SECRET
            if "configMap" in volume:
                volume["configMap"]["name"] = TOKEN_KEY_CONFIGMAP
    return obj


def _without_load_history(obj: Object) -> Object:
    """``obj`` without what the load-history component adds to the brokers: the claim's
    volume, its mount and --load-history (each removed once; asserted present)."""
    if obj["kind"] == "StatefulSet":
        spec = pod_spec(obj)
        [volume] = [v for v in spec["volumes"] if "persistentVolumeClaim" in v]
        assert volume["persistentVolumeClaim"]["claimName"] == HISTORY_CLAIM
        spec["volumes"].remove(volume)
        [container] = spec["containers"]
        [mount] = [m for m in container["volumeMounts"] if m["name"] == volume["name"]]
        container["volumeMounts"].remove(mount)
        container["args"].remove(f"--load-history={flag(container, 'load-history')}")
    return obj


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlays_change_only_images_resources_the_secret_and_the_load_history(
    overlay: str,
) -> None:
    """Beyond images, resources and the token Secret, production adds the load history (the
    claim, and the brokers writing to it) and nothing else; kind adds nothing."""
    base = {
        (o["kind"], o["metadata"]["name"]): _without_overlay_changes(o) for o in rendered("base")
    }
    objects = [o for o in rendered(overlay) if o["kind"] not in ("Secret", "ConfigMap")]
    added = {("PersistentVolumeClaim", HISTORY_CLAIM)} if overlay == "production" else set()
    assert {(o["kind"], o["metadata"]["name"]) for o in objects} == base.keys() | added
    for obj in objects:
        key = (obj["kind"], obj["metadata"]["name"])
        if key in added:
            continue
        if added:
            obj = _without_load_history(obj)
        assert _without_overlay_changes(obj) == base[key], f"{overlay} changes {key}"


# -- the load history ------------------------------------------------------------------------------


def _access_modes(objects: list[Object]) -> set[str]:
    """Every access mode a target's claims ask for: its PersistentVolumeClaims' and its
    StatefulSets' claim templates'."""
    claims = of_kind(objects, "PersistentVolumeClaim") + [
        template
        for workload in of_kind(objects, "StatefulSet")
        for template in workload["spec"].get("volumeClaimTemplates", [])
    ]
    return {mode for claim in claims for mode in claim["spec"]["accessModes"]}


@pytest.mark.parametrize("target", ["base", "kind"])
def test_kind_needs_no_read_write_many_storage(target: str) -> None:
    """kind's default storage class offers ReadWriteOnce only: nothing here asks for more, and
    the brokers keep no load history (the controller evaluates their load records itself)."""
    objects = rendered(target)
    assert _access_modes(objects) == {"ReadWriteOnce"}
    brokers = find(objects, "StatefulSet", BROKER)
    assert not [v for v in pod_spec(brokers)["volumes"] if "persistentVolumeClaim" in v]
    [container] = pod_spec(brokers)["containers"]
    assert flag(container, "load-history") is None


def test_production_brokers_write_the_load_history_to_the_shared_claim() -> None:
    objects = rendered("production")
    claim = find(objects, "PersistentVolumeClaim", HISTORY_CLAIM)
    # Every broker writes it, from whichever node it runs on.
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    assert _access_modes(objects) == {"ReadWriteOnce", "ReadWriteMany"}
    brokers = find(objects, "StatefulSet", BROKER)
    spec = pod_spec(brokers)
    [volume] = [v for v in spec["volumes"] if "persistentVolumeClaim" in v]
    assert volume["persistentVolumeClaim"] == {"claimName": HISTORY_CLAIM}  # not read-only
    [container] = spec["containers"]
    [mount] = [m for m in container["volumeMounts"] if m["name"] == volume["name"]]
    assert not mount.get("readOnly") and "subPath" not in mount
    assert flag(container, "load-history") == mount["mountPath"]
    # Writable by the broker's user as the data volume is: the pod's fsGroup is its group.
    security = spec["securityContext"]
    assert security["fsGroup"] == NON_ROOT_UID
    assert security["fsGroupChangePolicy"] == "OnRootMismatch"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True


def test_kind_cluster_has_a_control_plane_and_two_workers() -> None:
    cluster = yaml.safe_load((MANIFESTS / "kind" / "cluster.yaml").read_text())
    assert (cluster["apiVersion"], cluster["kind"]) == ("kind.x-k8s.io/v1alpha4", "Cluster")
    assert [node["role"] for node in cluster["nodes"]] == ["control-plane", "worker", "worker"]
