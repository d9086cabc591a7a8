"""The operator end to end, driven as a user drives it: kubectl for the topics, ``stctl`` for
the messages. Two operator replicas (kopf and the controller, ``stctl operator``) share the
topics; brokers serve them.

``--e2e-target=local`` (the default, CI): processes on a kube-api of our own.
``--e2e-target=kind`` (``make e2e``): the same scenarios on a kind cluster.
"""

from __future__ import annotations

import functools
import json
from collections import defaultdict
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import yaml
from e2e_clusters import (
    BROKER_USER,
    OPERATOR_USER,
    SYSTEM_NAMESPACE,
    Cluster,
    LocalCluster,
    yaml_file,
)
from rbac import allows, grants_of, unused

from scalable_topics.kubeapi.audit import read_audit_log
from scalable_topics.model.ownership import SHARD_COUNT_ANNOTATION, shard_lease_name, shard_of
from scalable_topics.model.scale_request import MERGE_ANNOTATION, SPLIT_ANNOTATION
from support.eventually import eventually

pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="module")]

NAMESPACE = "default"
MANIFESTS = Path(__file__).parents[2] / "manifests"
WAIT_SECONDS = 120


Scenario = Callable[[Cluster, Path], Awaitable[None]]


def scenario(test: Scenario) -> Scenario:
    """Record in the cluster that ``test`` ran to its end (the RBAC check runs the others)."""

    @functools.wraps(test)
    async def recorded(cluster: Cluster, tmp_path: Path) -> None:
        await test(cluster, tmp_path)
        cluster.completed.add(test.__name__)

    return recorded


async def wait(cluster: Cluster, condition: str, resource: str) -> None:
    """``kubectl wait --for=CONDITION RESOURCE``, bounded by WAIT_SECONDS."""
    await cluster.kubectl(
        "wait",
        f"--for={condition}",
        resource,
        f"--timeout={WAIT_SECONDS}s",
        timeout=WAIT_SECONDS + 30,
    )


def topic_manifest(name: str, segments: int, tier: str | None = None) -> str:
    spec: dict[str, object] = {
        "initialSegments": segments,
        "subscriptions": [{"name": "billing", "type": "Stream"}],
    }
    if tier is not None:
        spec["properties"] = {"tier": tier}
    topic = {
        "apiVersion": "scalabletopics.dev/v1alpha1",
        "kind": "ScalableTopic",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": spec,
    }
    return yaml.safe_dump(topic, sort_keys=False)


async def apply_topic(
    cluster: Cluster, tmp_path: Path, name: str, segments: int, tier: str | None = None
) -> None:
    manifest = yaml_file(tmp_path, f"{name}.yaml", topic_manifest(name, segments, tier))
    await cluster.kubectl("apply", "-f", str(manifest))
    await wait(cluster, "condition=Ready", f"st/{name}")


async def topic_status(cluster: Cluster, name: str) -> dict:  # type: ignore[type-arg]
    topic = json.loads(await cluster.kubectl("get", "st", name, "-o", "json"))
    return topic.get("status") or {}


def active_segments(status: dict) -> list[int]:  # type: ignore[type-arg]
    return sorted(s["id"] for s in status.get("segments", ()) if s["state"] == "Active")


async def produce(cluster: Cluster, name: str, messages: list[str]) -> None:
    args = [arg for message in messages for arg in ("-m", message)]
    output = await cluster.stctl("produce", name, "--key-separator=:", *args, "-o", "json")
    assert json.loads(output)["acknowledged"] == len(messages), output


async def consume(cluster: Cluster, name: str, count: int) -> list[tuple[str, str]]:
    """(key, payload) of ``count`` messages of the Stream subscription, acknowledged."""
    output = await cluster.stctl(
        "consume", name, "-s", "billing", "-c", str(count), "-o", "json", "--timeout", "60"
    )
    received = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    return [(m["key"], m["payload"]) for m in received]


def keyed(prefix: str, keys: int, per_key: int) -> list[str]:
    return [f"{prefix}-key-{k}:{prefix}-{k}-{i}" for i in range(per_key) for k in range(keys)]


def assert_every_message_in_key_order(received: list[tuple[str, str]], sent: list[str]) -> None:
    assert sorted(f"{k}:{p}" for k, p in received) == sorted(sent)
    by_key: defaultdict[str, list[str]] = defaultdict(list)
    for key, payload in received:
        by_key[key].append(payload)
    for key, payloads in by_key.items():
        expected = [m.split(":", 1)[1] for m in sent if m.split(":", 1)[0] == key]
        assert payloads == expected, f"key {key} out of order"


@scenario
async def test_a_namespace_consumer_reads_the_topics_whose_properties_match(
    cluster: Cluster, tmp_path: Path
) -> None:
    """Topics applied with kubectl, read with ``stctl consume -n --filter``: the brokers'
    namespace watch, fed by the Kubernetes API, attaches the topics whose properties match
    and no other."""
    tiers = {"e2e-gold-a": "gold", "e2e-gold-b": "gold", "e2e-silver": "silver"}
    sent = {name: keyed(name, keys=4, per_key=3) for name in tiers}
    for name, tier in tiers.items():
        await apply_topic(cluster, tmp_path, name, segments=2, tier=tier)
        await produce(cluster, name, sent[name])
    gold = [name for name, tier in tiers.items() if tier == "gold"]
    expected = sum(len(sent[name]) for name in gold)

    output = await cluster.stctl(
        "consume", "-n", NAMESPACE, "--filter", "tier=gold", "-s", "billing", "-t", "stream",
        "-c", str(expected), "-o", "json", "--timeout", "60",
    )  # fmt: skip
    received: defaultdict[str, list[tuple[str, str]]] = defaultdict(list)
    for line in output.splitlines():
        if line.startswith("{"):
            message = json.loads(line)
            received[message["topic"]].append((message["key"], message["payload"]))
    assert sorted(received) == [f"{NAMESPACE}/{name}" for name in gold]
    for name in gold:
        assert_every_message_in_key_order(received[f"{NAMESPACE}/{name}"], sent[name])


async def topic_led_by(cluster: Cluster, identity: str, prefix: str) -> str:
    """A topic name whose ownership shard ``identity`` holds now (read from the shard Leases,
    as anyone with kubectl can)."""
    leases = json.loads(
        await cluster.kubectl("get", "leases", "-n", SYSTEM_NAMESPACE, "-o", "json")
    )["items"]
    by_name = {lease["metadata"]["name"]: lease for lease in leases}
    counts = {
        lease["metadata"].get("annotations", {}).get(SHARD_COUNT_ANNOTATION) for lease in leases
    } - {None}
    assert len(counts) == 1, f"the shard Leases announce {counts}"
    count = int(counts.pop())
    for index in range(1000):
        name = f"{prefix}-{index}"
        lease = by_name.get(shard_lease_name(shard_of(NAMESPACE, name, count)))
        if lease is not None and lease["spec"].get("holderIdentity") == identity:
            return name
    raise AssertionError(f"{identity} holds no shard")


@scenario
async def test_an_applied_topic_becomes_ready_and_carries_messages(
    cluster: Cluster, tmp_path: Path
) -> None:
    await apply_topic(cluster, tmp_path, "e2e-orders", segments=2)
    status = await topic_status(cluster, "e2e-orders")
    assert status["phase"] == "Ready"
    assert status["controller"]["identity"] in cluster.operators
    segments = await cluster.kubectl(
        "get", "seg", "-l", "scalabletopics.dev/topic=e2e-orders", "-o", "name"
    )
    assert len(segments.split()) == 2

    sent = keyed("orders", keys=8, per_key=5)
    await produce(cluster, "e2e-orders", sent)
    assert_every_message_in_key_order(await consume(cluster, "e2e-orders", len(sent)), sent)


@scenario
async def test_split_and_merge_by_editing_the_resource(cluster: Cluster, tmp_path: Path) -> None:
    name = "e2e-scaling"
    await apply_topic(cluster, tmp_path, name, segments=2)
    before = keyed("before", keys=6, per_key=3)
    await produce(cluster, name, before)

    await cluster.kubectl("annotate", "st", name, f"{SPLIT_ANNOTATION}=0")
    await wait(cluster, "jsonpath={.status.activeSegments}=3", f"st/{name}")
    await wait(cluster, "condition=Ready", f"st/{name}")
    split = await topic_status(cluster, name)
    assert active_segments(split) == [1, 2, 3]
    between = keyed("between", keys=6, per_key=3)
    await produce(cluster, name, between)  # the producer writes to the children now

    await cluster.kubectl("annotate", "st", name, f"{MERGE_ANNOTATION}=2,3", "--overwrite")
    await wait(cluster, "jsonpath={.status.activeSegments}=2", f"st/{name}")
    await wait(cluster, "condition=Ready", f"st/{name}")
    merged = await topic_status(cluster, name)
    assert len(active_segments(merged)) == 2 and 1 in active_segments(merged)
    after = keyed("after", keys=6, per_key=3)
    await produce(cluster, name, after)

    sent = before + between + after
    assert_every_message_in_key_order(await consume(cluster, name, len(sent)), sent)


@scenario
async def test_the_other_replica_finishes_a_split_whose_leader_was_killed(
    cluster: Cluster, tmp_path: Path
) -> None:
    victim = cluster.crashing_operator
    name = await topic_led_by(cluster, victim, "e2e-failover")
    await apply_topic(cluster, tmp_path, name, segments=2)
    assert (await topic_status(cluster, name))["controller"]["identity"] == victim
    sent = keyed("failover", keys=6, per_key=4)
    await produce(cluster, name, sent[: len(sent) // 2])

    await cluster.kubectl("annotate", "st", name, f"{SPLIT_ANNOTATION}=1")
    await cluster.kill_mid_split(name)

    await wait(cluster, "jsonpath={.status.activeSegments}=3", f"st/{name}")
    await wait(cluster, "condition=Ready", f"st/{name}")
    status = await topic_status(cluster, name)
    assert status["controller"]["identity"] != victim
    assert "pendingOperation" not in status
    assert active_segments(status) == [0, 2, 3]
    await produce(cluster, name, sent[len(sent) // 2 :])
    assert_every_message_in_key_order(await consume(cluster, name, len(sent)), sent)
    await cluster.revive(victim)


@scenario
async def test_topics_through_the_brokers_admin_api(cluster: Cluster, tmp_path: Path) -> None:
    """``stctl topics`` and ``stctl subscriptions``: every broker serves topic administration,
    writing the same resources kubectl does."""
    name = "e2e-admin"
    await cluster.stctl("topics", "create", name, "--segments", "2", "--subscription", "audit")
    await wait(cluster, "condition=Ready", f"st/{name}")
    await cluster.stctl("subscriptions", "create", name, "late")

    async def subscriptions() -> set[str]:
        described = json.loads(await cluster.stctl("topics", "describe", name, "-o", "json"))
        return {s["name"] for s in described["subscriptions"] if s["declared"]}

    assert await subscriptions() == {"audit", "late"}
    await cluster.stctl("subscriptions", "delete", name, "late")
    assert await subscriptions() == {"audit"}
    await cluster.stctl("topics", "split", name, "0")
    # Not the epoch: the parent holds no message, so its garbage collection follows the split
    # at once and moves the epoch again.
    await wait(cluster, "jsonpath={.status.activeSegments}=3", f"st/{name}")
    await cluster.stctl("topics", "delete", name)
    await wait(cluster, "delete", f"st/{name}")


@scenario
async def test_deleting_a_topic_removes_its_segments_and_their_storage(
    cluster: Cluster, tmp_path: Path
) -> None:
    name = "e2e-doomed"
    await apply_topic(cluster, tmp_path, name, segments=3)
    await produce(cluster, name, keyed("doomed", keys=3, per_key=2))
    assert await cluster.segment_storage(NAMESPACE, name)

    await cluster.kubectl(  # waits until the object is gone
        "delete", "st", name, f"--timeout={WAIT_SECONDS}s", timeout=WAIT_SECONDS + 30
    )
    assert "No resources found" in await cluster.kubectl(
        "get", "seg", "-l", f"scalabletopics.dev/topic={name}", check=False
    )

    async def storage_gone() -> bool:
        return not await cluster.segment_storage(NAMESPACE, name)

    await eventually(storage_gone, "every broker to remove the topic's storage")


# Permissions the manifests grant that a run of the scenarios need not use, and why.
NOT_ALWAYS_USED = {
    # Reads that follow a lost compare-and-swap (the adapter reads which version won) or an
    # object missing from the cache (Informer.catch_up): they happen when two writers race or
    # a watch lags a write, not in every run.
    (OPERATOR_USER, "get", "coordination.k8s.io", "leases"),
    (OPERATOR_USER, "get", "scalabletopics.dev", "scalabletopics"),
    (OPERATOR_USER, "get", "scalabletopics.dev", "segments"),
    # A broker reads a Segment only for storage it finds that no longer matches a placement.
    (BROKER_USER, "get", "scalabletopics.dev", "segments"),
    # Not a request at all: what the OwnerReferencesPermissionEnforcement admission plugin
    # demands of whoever creates a Segment that blocks its topic's deletion.
    (OPERATOR_USER, "update", "scalabletopics.dev", "scalabletopics/finalizers"),
}


async def test_the_rbac_manifests_grant_exactly_the_calls_the_code_makes(
    cluster: Cluster, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Every API call the operator and the brokers made in these scenarios is allowed by the
    RBAC rules of manifests/base for their service accounts, and every rule was needed (but
    for NOT_ALWAYS_USED). The local cluster's API server logs who called what; a kind
    cluster enforces the rules itself, so there the scenarios passing is the check."""
    if not isinstance(cluster, LocalCluster):
        pytest.skip("the kind cluster enforces RBAC itself: the scenarios passing is the check")
    scenarios = [
        test_an_applied_topic_becomes_ready_and_carries_messages,
        test_split_and_merge_by_editing_the_resource,
        test_the_other_replica_finishes_a_split_whose_leader_was_killed,
        test_topics_through_the_brokers_admin_api,
        test_deleting_a_topic_removes_its_segments_and_their_storage,
    ]
    for scenario in scenarios:  # those this run has not run yet (say, under -k)
        if scenario.__name__ not in cluster.completed:
            directory = tmp_path / scenario.__name__
            directory.mkdir()
            await scenario(cluster, directory)
    rendered = await cluster.kubectl("kustomize", str(MANIFESTS / "base"))
    objects = [o for o in yaml.safe_load_all(rendered) if o]
    calls = read_audit_log(cluster.audit_log)
    for user in (OPERATOR_USER, BROKER_USER):
        namespace, account = user.split(":")[2:]
        grants = grants_of(objects, namespace, account)
        made = [c for c in calls if c["user"] == user]
        assert made, f"{user} made no calls"
        refused = {
            f"{c['verb']} {c['apiGroup'] or 'core'}/{c['resource']}"
            f"{'/' + c['subresource'] if c['subresource'] else ''} in {c['namespace'] or '-'}"
            f"{' ' + c['nonResourceURL'] if c['nonResourceURL'] else ''}"
            for c in made
            if not allows(grants, c)
        }
        assert not refused, f"{account} calls what its RBAC rules do not allow: {sorted(refused)}"
        needless = [
            line
            for line in unused(grants, made)
            if not any(
                line.endswith(f": {verb} {group}/{resource}") and who == user
                for who, verb, group, resource in NOT_ALWAYS_USED
            )
        ]
        assert not needless, f"{account} is granted what no call needed: {needless}"
