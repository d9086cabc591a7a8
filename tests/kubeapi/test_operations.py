"""The API server's verbs over the embedded store, apart from HTTP."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from scalable_topics.kubeapi import builtins
from scalable_topics.kubeapi.admission import Admitted, FieldValidation
from scalable_topics.kubeapi.field_selectors import FieldSelector, parse_field_selector
from scalable_topics.kubeapi.operations import Operations
from scalable_topics.kubeapi.pagination import ListPager
from scalable_topics.kubeapi.registry import Registry
from scalable_topics.kubeapi.resources import ResourceType
from scalable_topics.kubeapi.status import ApiError
from scalable_topics.store import EmbeddedStore

NAMESPACE = ResourceType(
    "", "v1", "Namespace", "namespaces", "namespace", namespaced=False, status_subresource=True
)
THING = ResourceType(
    "test.dev", "v1", "Thing", "things", "thing", namespaced=True, status_subresource=True
)
Object = dict[str, Any]
STRICT = FieldValidation.STRICT


def admit_all(
    resource: ResourceType, new: Object, old: Object | None, fv: FieldValidation
) -> Admitted:
    return Admitted(new, ())


@pytest.fixture
async def ops(tmp_path: Path) -> AsyncIterator[Operations]:
    registry = Registry([NAMESPACE, THING])
    store = await EmbeddedStore.open(
        tmp_path / "store.db", kinds=registry.store_kinds, poll_interval=0.01, history_limit=50
    )
    operations = Operations(store, registry, admit_all, pager=ListPager(max_lists=2))
    for name in ("default", "other"):
        await store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    yield operations
    await store.close()


def thing(name: str | None = None, spec: Object | None = None, **meta: Any) -> Object:
    metadata: Object = dict(meta)
    if name is not None:
        metadata["name"] = name
    return {
        "apiVersion": "test.dev/v1",
        "kind": "Thing",
        "metadata": metadata,
        "spec": spec or {"a": 1},
    }


async def test_create_sets_the_system_fields_and_drops_status(ops: Operations) -> None:
    body = thing("t1")
    body["status"] = {"x": 1}
    written = await ops.create(THING, "default", body, STRICT)
    meta = written.object["metadata"]
    assert written.created and meta["generation"] == 1 and meta["uid"] and meta["creationTimestamp"]
    assert "status" not in written.object and meta["namespace"] == "default"


async def test_generate_name_makes_a_fresh_name(ops: Operations) -> None:
    first = await ops.create(THING, "default", thing(generateName="job-"), STRICT)
    second = await ops.create(THING, "default", thing(generateName="job-"), STRICT)
    names = {first.object["metadata"]["name"], second.object["metadata"]["name"]}
    assert len(names) == 2 and all(n.startswith("job-") and len(n) == 9 for n in names)
    with pytest.raises(ApiError) as caught:
        await ops.create(THING, "default", thing(), STRICT)
    assert caught.value.code == 422 and caught.value.causes[0].field == "metadata.name"


async def test_create_needs_an_open_namespace(ops: Operations) -> None:
    with pytest.raises(ApiError) as caught:
        await ops.create(THING, "nowhere", thing("t"), STRICT)
    assert caught.value.code == 404 and 'namespaces "nowhere" not found' in caught.value.message
    await ops.store.patch_status("Namespace", "", "other", {"status": {"phase": "Terminating"}})
    with pytest.raises(ApiError) as caught:
        await ops.create(THING, "other", thing("t"), STRICT)
    assert caught.value.code == 403 and "being terminated" in caught.value.message


async def test_create_refuses_a_body_of_another_kind_or_namespace(ops: Operations) -> None:
    with pytest.raises(ApiError, match="do not match") as caught:
        await ops.create(THING, "default", {**thing("t"), "kind": "Other"}, STRICT)
    assert caught.value.code == 400
    with pytest.raises(ApiError, match="namespace of the provided object"):
        await ops.create(THING, "default", thing("t", namespace="other"), STRICT)


async def test_bad_metadata_is_refused_with_a_cause_per_field(ops: Operations) -> None:
    body = thing("Bad_Name", labels={"k": "bad value"})
    with pytest.raises(ApiError) as caught:
        await ops.create(THING, "default", body, STRICT)
    assert caught.value.code == 422
    assert [c.field for c in caught.value.causes] == ["metadata.name", "metadata.labels"]
    assert (await ops.store.list("Thing")).items == []


async def test_update_with_a_stale_version_conflicts(ops: Operations) -> None:
    created = (await ops.create(THING, "default", thing("t"), STRICT)).object
    first = {**created, "spec": {"a": 2}}
    updated = (await ops.update(THING, "default", "t", first, STRICT)).object
    assert updated["metadata"]["generation"] == 2
    with pytest.raises(ApiError) as caught:
        await ops.update(THING, "default", "t", {**created, "spec": {"a": 3}}, STRICT)
    assert caught.value.code == 409 and caught.value.reason == "Conflict"
    assert "the object has been modified" in caught.value.message


async def test_update_without_a_version_is_unconditional(ops: Operations) -> None:
    await ops.create(THING, "default", thing("t"), STRICT)
    written = await ops.update(THING, "default", "t", thing("t", spec={"a": 5}), STRICT)
    assert written.object["spec"] == {"a": 5}


async def test_main_resource_ignores_status_and_status_ignores_spec(ops: Operations) -> None:
    created = (await ops.create(THING, "default", thing("t"), STRICT)).object
    status = {**created, "spec": {"a": 9}, "status": {"phase": "Ready"}}
    after_status = (await ops.update(THING, "default", "t", status, STRICT, status=True)).object
    assert after_status["spec"] == {"a": 1} and after_status["status"] == {"phase": "Ready"}
    assert after_status["metadata"]["generation"] == 1
    main = {**after_status, "spec": {"a": 2}, "status": {"phase": "Gone"}}
    after_main = (await ops.update(THING, "default", "t", main, STRICT)).object
    assert after_main["status"] == {"phase": "Ready"} and after_main["metadata"]["generation"] == 2


async def test_merge_patch_with_a_version_is_a_precondition(ops: Operations) -> None:
    created = (await ops.create(THING, "default", thing("t"), STRICT)).object
    rv = created["metadata"]["resourceVersion"]
    patch = json.dumps({"metadata": {"resourceVersion": rv}, "spec": {"b": 2}}).encode()
    merge = "application/merge-patch+json"
    patched = (await ops.patch(THING, "default", "t", patch, merge, STRICT)).object
    assert patched["spec"] == {"a": 1, "b": 2}
    with pytest.raises(ApiError) as caught:
        await ops.patch(THING, "default", "t", patch, merge, STRICT)
    assert caught.value.code == 409


async def test_json_patch_test_failure_is_422_and_changes_nothing(ops: Operations) -> None:
    created = (await ops.create(THING, "default", thing("t"), STRICT)).object
    rv = created["metadata"]["resourceVersion"]
    ops_json = "application/json-patch+json"
    add = {"op": "add", "path": "/metadata/finalizers", "value": ["x.dev/f"]}
    good = json.dumps([{"op": "test", "path": "/metadata/resourceVersion", "value": rv}, add])
    patched = (await ops.patch(THING, "default", "t", good.encode(), ops_json, STRICT)).object
    assert patched["metadata"]["finalizers"] == ["x.dev/f"]
    with pytest.raises(ApiError) as caught:
        await ops.patch(THING, "default", "t", good.encode(), ops_json, STRICT)
    assert caught.value.code == 422
    assert (await ops.get(THING, "default", "t"))["metadata"]["resourceVersion"] == patched[
        "metadata"
    ]["resourceVersion"]


async def test_strategic_and_apply_patches_are_415_for_custom_resources(ops: Operations) -> None:
    await ops.create(THING, "default", thing("t"), STRICT)
    for content_type in ("application/strategic-merge-patch+json", "application/apply-patch+yaml"):
        with pytest.raises(ApiError) as caught:
            await ops.patch(THING, "default", "t", b"{}", content_type, STRICT)
        assert caught.value.code == 415


async def test_delete_with_finalizers_marks_then_removal_deletes(ops: Operations) -> None:
    await ops.create(THING, "default", thing("t", finalizers=["x.dev/f"]), STRICT)
    marked = await ops.delete(THING, "default", "t")
    assert not marked.removed and marked.object["metadata"]["deletionTimestamp"]
    add = json.dumps({"metadata": {"finalizers": ["x.dev/f", "x.dev/g"]}}).encode()
    with pytest.raises(ApiError) as caught:
        await ops.patch(THING, "default", "t", add, "application/merge-patch+json", STRICT)
    assert caught.value.code == 422 and caught.value.causes[0].field == "metadata.finalizers"
    drop = json.dumps({"metadata": {"finalizers": None}}).encode()
    await ops.patch(THING, "default", "t", drop, "application/merge-patch+json", STRICT)
    with pytest.raises(ApiError) as gone:
        await ops.get(THING, "default", "t")
    assert gone.value.code == 404 and gone.value.message == 'things.test.dev "t" not found'


async def test_delete_preconditions(ops: Operations) -> None:
    created = (await ops.create(THING, "default", thing("t"), STRICT)).object
    with pytest.raises(ApiError) as caught:
        await ops.delete(THING, "default", "t", uid="other")
    assert caught.value.code == 409 and "Precondition failed" in caught.value.message
    with pytest.raises(ApiError) as stale:
        await ops.delete(THING, "default", "t", resource_version="1")
    assert stale.value.code == 409
    assert (await ops.delete(THING, "default", "t", uid=created["metadata"]["uid"])).removed


async def test_lists_page_consistently_and_expire(ops: Operations) -> None:
    for index in range(5):
        await ops.create(THING, "default", thing(f"t{index}"), STRICT)
    first = await ops.list(
        THING, None, label_selector=None, field_selector=FieldSelector(), limit=2
    )
    assert [o["metadata"]["name"] for o in first.items] == ["t0", "t1"]
    assert first.remaining == 3 and first.continue_token
    await ops.create(THING, "default", thing("t2a"), STRICT)  # after the snapshot
    rest: list[str] = []
    token = first.continue_token
    while token:
        page = await ops.list(
            THING,
            None,
            label_selector=None,
            field_selector=FieldSelector(),
            limit=2,
            continue_token=token,
        )
        assert page.resource_version == first.resource_version
        rest += [o["metadata"]["name"] for o in page.items]
        token = page.continue_token
    assert rest == ["t2", "t3", "t4"]
    pages = [
        await ops.list(THING, None, label_selector=None, field_selector=FieldSelector(), limit=1)
        for _ in range(3)
    ]
    with pytest.raises(ApiError) as caught:  # the pager holds two lists: the first is gone
        await ops.list(
            THING,
            None,
            label_selector=None,
            field_selector=FieldSelector(),
            limit=1,
            continue_token=pages[0].continue_token,
        )
    assert caught.value.code == 410 and caught.value.reason == "Expired"


async def test_field_selectors_filter_lists(ops: Operations) -> None:
    await ops.create(THING, "default", thing("a"), STRICT)
    await ops.create(THING, "other", thing("a"), STRICT)
    await ops.create(THING, "other", thing("b"), STRICT)
    selector = parse_field_selector("metadata.name=a,metadata.namespace!=default", "Thing")
    page = await ops.list(THING, None, label_selector=None, field_selector=selector)
    assert [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in page.items] == [
        ("other", "a")
    ]
    with pytest.raises(ApiError, match=r"field label not supported: spec\.a"):
        parse_field_selector("spec.a=1", "Thing")


async def test_a_namespace_reads_as_active_until_it_terminates(ops: Operations) -> None:
    """The store keeps no status on create, so a new Namespace has no phase; the API server's
    defaulting (SetDefaults_NamespaceStatus) shows it Active, as kube-apiserver does."""
    registry = Registry([NAMESPACE], defaults=builtins.storage_defaults())
    defaulted = Operations(ops.store, registry, admit_all)
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}
    created = await defaulted.create(NAMESPACE, None, body, STRICT)
    assert created.object["status"] == {"phase": "Active"}
    assert "status" not in await ops.store.get("Namespace", "", "team")
    assert (await defaulted.get(NAMESPACE, None, "default"))["status"] == {"phase": "Active"}
    active = parse_field_selector("status.phase=Active", "Namespace")

    async def listed() -> list[str]:
        page = await defaulted.list(NAMESPACE, None, label_selector=None, field_selector=active)
        return [o["metadata"]["name"] for o in page.items]

    assert await listed() == ["default", "other", "team"]
    await defaulted.delete(NAMESPACE, None, "other")  # no collector here: it stays Terminating
    assert (await defaulted.get(NAMESPACE, None, "other"))["status"] == {"phase": "Terminating"}
    assert await listed() == ["default", "team"]


async def test_watch_resumes_and_a_compacted_version_is_an_error_event(ops: Operations) -> None:
    created = (await ops.create(THING, "default", thing("t"), STRICT)).object
    start = created["metadata"]["resourceVersion"]
    await ops.update(THING, "default", "t", thing("t", spec={"a": 2}), STRICT)
    stream = await ops.watch(
        THING,
        "default",
        resource_version=start,
        label_selector=None,
        field_selector=FieldSelector(),
        allow_bookmarks=False,
    )
    async with stream:
        events = aiter(stream)
        item = await asyncio.wait_for(anext(events), 5)
    assert item.type == "MODIFIED" and item.object["spec"] == {"a": 2}
    for index in range(60):  # past the store's history of 50
        await ops.update(THING, "default", "t", thing("t", spec={"a": index}), STRICT)
    stream = await ops.watch(
        THING,
        "default",
        resource_version=start,
        label_selector=None,
        field_selector=FieldSelector(),
        allow_bookmarks=False,
    )
    async with stream:
        item = await asyncio.wait_for(anext(aiter(stream)), 5)
    assert item.type == "ERROR" and item.object["code"] == 410
    assert item.object["reason"] == "Expired"


async def test_dry_runs_check_everything_and_write_nothing(ops: Operations) -> None:
    dry = await ops.create(THING, "default", thing("t"), STRICT, dry_run=True)
    assert dry.object["metadata"]["uid"] and dry.object["metadata"]["generation"] == 1
    assert (await ops.store.list("Thing")).items == []
    with pytest.raises(ApiError) as caught:
        await ops.create(THING, "default", thing("Bad_Name"), STRICT, dry_run=True)
    assert caught.value.code == 422
    created = (await ops.create(THING, "default", thing("t"), STRICT)).object
    with pytest.raises(ApiError) as exists:
        await ops.create(THING, "default", thing("t"), STRICT, dry_run=True)
    assert exists.value.code == 409
    changed = {**created, "spec": {"a": 7}}
    preview = await ops.update(THING, "default", "t", changed, STRICT, dry_run=True)
    assert preview.object["spec"] == {"a": 7} and preview.object["metadata"]["generation"] == 2
    stale = {**changed, "metadata": {**created["metadata"], "resourceVersion": "1"}}
    with pytest.raises(ApiError) as conflict:
        await ops.update(THING, "default", "t", stale, STRICT, dry_run=True)
    assert conflict.value.code == 409
    assert (await ops.delete(THING, "default", "t", dry_run=True)).removed
    assert await ops.get(THING, "default", "t") == created
