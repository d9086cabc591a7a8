"""Store errors, one per Kubernetes API status the port can answer with."""


class StoreError(Exception):
    """Base of every error the store port raises."""


def _named(kind: str, namespace: str, name: str) -> str:
    return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"


class NotFound(StoreError):
    """404: no such object."""

    def __init__(self, kind: str, namespace: str, name: str) -> None:
        super().__init__(f"{_named(kind, namespace, name)} not found")
        self.kind, self.namespace, self.name = kind, namespace, name


class AlreadyExists(StoreError):
    """409 on create: an object of that kind, namespace and name exists."""

    def __init__(self, kind: str, namespace: str, name: str) -> None:
        super().__init__(f"{_named(kind, namespace, name)} already exists")
        self.kind, self.namespace, self.name = kind, namespace, name


class Conflict(StoreError):
    """409 on write: the object changed since the resourceVersion the writer read."""

    def __init__(self, kind: str, namespace: str, name: str, expected: str, actual: str) -> None:
        super().__init__(
            f"{_named(kind, namespace, name)} was modified: the write expected resourceVersion "
            f"{expected}, the store has {actual}; read it again and retry"
        )
        self.kind, self.namespace, self.name = kind, namespace, name
        self.expected, self.actual = expected, actual


class Expired(StoreError):
    """410: the history a watch asked to resume from has been compacted away; list again."""

    def __init__(self, resource_version: str, oldest: str) -> None:
        super().__init__(
            f"resourceVersion {resource_version} is too old: history starts after {oldest}; "
            "list again and watch from the list's resourceVersion"
        )
        self.resource_version, self.oldest = resource_version, oldest


class Invalid(StoreError):
    """422: the object or request is malformed (missing name, wrong kind, forbidden change)."""


class UnknownKind(Invalid):
    def __init__(self, kind: str, known: list[str]) -> None:
        super().__init__(
            f"kind {kind!r} is not served by this store (known: {', '.join(sorted(known))})"
        )
        self.kind = kind


class StoreClosed(StoreError):
    """The store was closed; no further calls are possible."""
