"""The Python client of scalable topics: producers, consumers and administration.

async with Client("ws://127.0.0.1:6650") as client:
    producer = await client.create_producer("orders")
    await producer.send(b"order 1", key="customer-17")

Scripts without an event loop use SyncClient, the same API blocking. Client.from_config(),
Admin.from_config() and SyncClient.from_config() take the service URL and token from the
client configuration file (stctl's, see ClientSettings and docs/client-config.md).
"""

from .checkpoint import Checkpoint
from .checkpoint_consumer import CheckpointConsumer
from .client import Client
from .client_config import ClientConfigError, write_client_config
from .client_settings import ClientSettings
from .consumer_message import ReceivedMessage
from .errors import (
    AlreadyExists,
    AuthenticationFailed,
    ClientClosed,
    ClientError,
    ConnectionFailed,
    ConsumerBusy,
    FailedSend,
    InvalidRequest,
    MessageTooLarge,
    NotAuthorized,
    NotFound,
    OperationInProgress,
    ProducerBusy,
    ProducerFenced,
    SendFailed,
    ServerError,
    Timeout,
    TooManyOpen,
    Unauthorized,
    UnsupportedVersion,
)
from .namespace_queue_consumer import NamespaceQueueConsumer
from .namespace_stream_consumer import NamespaceStreamConsumer
from .namespace_watcher import NamespaceWatcher, TopicSetChange
from .producer import Producer
from .queue_consumer import QueueConsumer
from .stream_consumer import StreamConsumer
from .sync import (
    SyncAdmin,
    SyncCheckpointConsumer,
    SyncClient,
    SyncNamespaceQueueConsumer,
    SyncNamespaceStreamConsumer,
    SyncNamespaceWatcher,
    SyncProducer,
    SyncQueueConsumer,
    SyncStreamConsumer,
)

__all__ = [
    "AlreadyExists",
    "AuthenticationFailed",
    "Checkpoint",
    "CheckpointConsumer",
    "Client",
    "ClientClosed",
    "ClientConfigError",
    "ClientError",
    "ClientSettings",
    "ConnectionFailed",
    "ConsumerBusy",
    "FailedSend",
    "InvalidRequest",
    "MessageTooLarge",
    "NamespaceQueueConsumer",
    "NamespaceStreamConsumer",
    "NamespaceWatcher",
    "NotAuthorized",
    "NotFound",
    "OperationInProgress",
    "Producer",
    "ProducerBusy",
    "ProducerFenced",
    "QueueConsumer",
    "ReceivedMessage",
    "SendFailed",
    "ServerError",
    "StreamConsumer",
    "SyncAdmin",
    "SyncCheckpointConsumer",
    "SyncClient",
    "SyncNamespaceQueueConsumer",
    "SyncNamespaceStreamConsumer",
    "SyncNamespaceWatcher",
    "SyncProducer",
    "SyncQueueConsumer",
    "SyncStreamConsumer",
    "Timeout",
    "TooManyOpen",
    "TopicSetChange",
    "Unauthorized",
    "UnsupportedVersion",
    "write_client_config",
]
