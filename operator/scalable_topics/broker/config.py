"""A broker's settings, with the defaults a production deployment starts from."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ..protocol import DEFAULT_MAX_FRAME_BYTES, DEFAULT_MAX_MESSAGE_BYTES
from ..store import BudgetSettings

SyncPolicyName = Literal["batch", "interval", "none"]


class BrokerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    data_dir: Path
    store_url: str = Field(description="where Segment objects and drained markers live")
    store_budget: BudgetSettings | None = Field(
        default=None, description="the store client's request budget; None: the adapter's default"
    )
    host: str = "127.0.0.1"
    port: int = Field(default=6650, ge=0, le=65535)
    advertised_url: str | None = Field(
        default=None, description="how clients reach this broker; defaults to ws://host:port"
    )
    broker_id: str | None = None
    sync: SyncPolicyName = "batch"
    max_frame_bytes: int = Field(default=DEFAULT_MAX_FRAME_BYTES, ge=1024)
    max_message_bytes: int = Field(default=DEFAULT_MAX_MESSAGE_BYTES, ge=1)
    log_file_bytes: int = Field(
        default=64 * 1024 * 1024,
        ge=4096,
        description="a segment log rolls to a new file past this; retention drops whole files",
    )
    dispatch_batch: int = Field(default=512, ge=1, description="max messages in one delivery frame")
    key_shared_unblock_interval: float = Field(default=0.1, ge=0)
    max_pending_publishes_per_connection: int = Field(
        default=1000,
        ge=1,
        description="sends read and not yet answered on one connection; at the limit the "
        "broker stops reading the connection until an answer goes out (Pulsar's "
        "maxPendingPublishRequestsPerConnection)",
    )
    max_pending_requests_per_connection: int = Field(
        default=1000,
        ge=1,
        description="requests other than sends (acknowledgements, seeks) read "
        "on one connection and not yet answered; at the limit the broker stops reading the "
        "connection until one is answered",
    )
    max_pending_publish_bytes_per_connection: int = Field(
        default=64 * 1024 * 1024,
        ge=1,
        description="the same, in bytes of the sends' messages (see broker/inflight.py)",
    )
    max_pending_publishes_per_producer: int = Field(
        default=500,
        ge=1,
        description="sends of one producer read and not yet answered; a send past it is "
        "refused (ServiceNotReady) and the producer closed, so that the others on the "
        "connection keep the rest of its window",
    )
    max_unacked_messages_per_consumer: int = Field(
        default=50_000,
        ge=0,
        description="messages delivered to one consumer and not acknowledged; at the limit "
        "dispatch to it pauses until acks bring it to half (Pulsar's "
        "maxUnackedMessagesPerConsumer); 0: no limit",
    )
    max_unacked_messages_per_subscription: int = Field(
        default=200_000,
        ge=0,
        description="the same over every consumer of a subscription on one segment (Pulsar's "
        "maxUnackedMessagesPerSubscription); 0: no limit",
    )
    max_connections: int = Field(
        default=10_000,
        ge=1,
        description="WebSockets served at once (an idle one costs about 19 KiB and a file "
        "descriptor); past it an upgrade is answered 503 ServiceNotReady with Retry-After "
        "(Pulsar's brokerMaxConnections)",
    )
    max_connections_per_ip: int = Field(
        default=0,
        ge=0,
        description="WebSockets served at once from one peer address (Pulsar's "
        "brokerMaxConnectionsPerIp); 0: no limit, the default, as clients behind NAT or a "
        "proxy share one address",
    )
    max_open_per_connection: int = Field(
        default=10_000,
        ge=1,
        description="producers (waiting ones included), consumers, DAG watches, consumer "
        "registrations and exclusive grants one connection holds open, all kinds together; "
        "a request past it is refused with TooManyOpen",
    )
    retention_check_interval: float = Field(default=60.0, gt=0)
    load_window_seconds: float = Field(default=60.0, gt=0)
    load_history: str = Field(
        default="",
        description="where every load sample is appended as Parquet: a directory or a URI "
        "pyarrow's file systems accept (s3://bucket/prefix); empty: no history",
    )
    load_history_flush: float = Field(
        default=60.0, gt=0, description="seconds between two files of buffered samples"
    )
    load_history_retention: float = Field(
        default=7 * 86400.0,
        gt=0,
        description="seconds of history kept: older date partitions of this broker's files "
        "are deleted",
    )
    system_namespace: str = Field(
        default="scalable-topics", description="namespace of the brokers' heartbeat Leases"
    )
    heartbeat_seconds: float = Field(
        default=5.0, gt=0, description="how often the broker renews its Lease"
    )
    auth_token: str | None = Field(
        default=None,
        description="the cluster token: when set, every request must authenticate, and this "
        "token is the control plane's (it may do everything)",
    )
    token_public_key: Path | None = Field(
        default=None,
        description="the Ed25519 public key (PEM) that verifies client tokens (signed JWTs "
        "granting roles on namespaces); without it only the cluster token authenticates",
    )
    authenticate_metrics: bool = Field(
        default=False,
        description="/metrics requires the cluster token or a token that may read every "
        "namespace (it names every topic)",
    )
    handshake_timeout: float = Field(
        default=10.0,
        gt=0,
        description="seconds a connection has to send a whole request head (the WebSocket "
        "upgrade included), from connecting or from its previous response",
    )
    auth_timeout: float = Field(
        default=10.0,
        gt=0,
        description="seconds after the WebSocket upgrade within which Connect must arrive; "
        "then the connection is closed with 1008",
    )
    body_timeout: float = Field(
        default=30.0,
        gt=0,
        description="seconds an HTTP request body has to arrive whole; then 408 and the "
        "connection is closed",
    )
    max_segments: int | None = Field(
        default=None,
        ge=0,
        description="host at most this many segments (default: as many as the open-files "
        "limit allows, see broker/open_files.py)",
    )
    max_open_files: int | None = Field(
        default=None,
        ge=1,
        description="raise the open-files limit to this at start (default: the hard limit)",
    )

    @property
    def url(self) -> str:
        return self.advertised_url or f"ws://{self.host}:{self.port}"

    @property
    def identity(self) -> str:
        return self.broker_id or f"{self.host}:{self.port}"
