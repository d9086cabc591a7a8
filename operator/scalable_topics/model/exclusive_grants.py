"""Topic-wide exclusive producer grants, apart from any I/O (DESIGN guarantee 5).

A topic has one *producer epoch* and at most one *holder*, both persisted in
``status.producer``. Granting exclusive access to a new holder raises the epoch by one; the
controller then fences every segment to it, so whoever held an older epoch can no longer write
(exclusive-producer seed: "topic epoch"). Whether the holder is connected is not persisted: a
holder whose connection drops keeps the topic for a grace period, and may come back with the
epoch it was granted to resume without a new epoch.

``decide`` answers one request against the current hold; the controller carries the answer
out (and persists it before anyone is told). Only ExclusiveWithFencing takes a topic from
anyone (exclusive-producer seed). Exclusive and WaitForExclusive *claim* a topic nobody holds,
and a claim stands only if no producer of another name is connected to any of its segments:
the controller asks the brokers, and each refuses the claim's reservation while another
producer is connected there, atomically with it. The producers they name come back into
``decide`` as ``others``: Exclusive is then busy, WaitForExclusive waits. Waiting requests are
served in arrival order: a request with others ``ahead`` of it in line never overtakes them.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from enum import StrEnum

from .layout import SegmentLayout
from .resources import ProducerAccessMode, ProducerStatus, producer_name_problem

EXCLUSIVE_MODES = frozenset(
    {
        ProducerAccessMode.EXCLUSIVE,
        ProducerAccessMode.WAIT_FOR_EXCLUSIVE,
        ProducerAccessMode.EXCLUSIVE_WITH_FENCING,
    }
)


@dataclass(frozen=True, slots=True)
class ProducerHold:
    """The persisted part: the topic's producer epoch and who holds it, if anyone.
    ``claiming``: the holder's claim is not confirmed yet (some segment may still have another
    producer connected); nobody was told, and a new leader undoes it."""

    epoch: int = 0
    holder: str | None = None
    mode: ProducerAccessMode | None = None
    claiming: bool = False

    @classmethod
    def from_status(cls, status: ProducerStatus | None) -> ProducerHold:
        if status is None:
            return cls()
        if status.holder is None:
            return cls(status.epoch)
        return cls(status.epoch, status.holder, status.access_mode, status.claiming)

    def granted(
        self, holder: str, mode: ProducerAccessMode, epoch: int, claiming: bool = False
    ) -> ProducerHold:
        if epoch < self.epoch:
            raise ValueError(f"the producer epoch never goes back: {epoch} < {self.epoch}")
        return ProducerHold(epoch, holder, mode, claiming)

    def confirmed(self) -> ProducerHold:
        """The claim stands: every segment is reserved for the holder."""
        return ProducerHold(self.epoch, self.holder, self.mode)

    def released(self) -> ProducerHold:
        """Nobody holds the topic; the epoch stays, so the last holder stays fenced from any
        segment a later holder is granted."""
        return ProducerHold(self.epoch)

    def to_status(self, term: int) -> ProducerStatus:
        return ProducerStatus(
            epoch=self.epoch,
            holder=self.holder,
            access_mode=self.mode,
            term=term,
            claiming=self.claiming,
        )


class Refusal(StrEnum):
    BUSY = "busy"  # another holder has the topic, another producer is connected, or one waits
    FENCED = "fenced"  # the requester's epoch was taken over: it is closed for good
    INVALID = "invalid"  # the request makes no sense


@dataclass(frozen=True, slots=True)
class Refuse:
    reason: Refusal
    message: str


@dataclass(frozen=True, slots=True)
class Resume:
    """The holder is back (or the last holder, with nobody after it): same epoch, no bump."""

    epoch: int


@dataclass(frozen=True, slots=True)
class TakeOver:
    """ExclusiveWithFencing: a new grant at ``epoch`` that closes every other producer;
    ``displaced`` is the holder it fences, if any."""

    epoch: int
    displaced: str | None = None


@dataclass(frozen=True, slots=True)
class Claim:
    """Exclusive or WaitForExclusive on a topic nobody holds, with nobody ahead in line and no
    other producer known to be connected: a grant at ``epoch`` if every segment confirms, as it
    reserves itself for the holder, that no producer of another name is connected there."""

    epoch: int


@dataclass(frozen=True, slots=True)
class Wait:
    """WaitForExclusive while the topic is held, another producer is connected, or others wait
    ahead: queued, and served in arrival order once nobody holds the topic and no other
    producer is connected."""


Decision = Refuse | Resume | TakeOver | Claim | Wait


def decide(
    hold: ProducerHold,
    holder_connected: bool,
    name: str,
    mode: ProducerAccessMode,
    requested_epoch: int | None,
    *,
    ahead: int = 0,
    others: Collection[str] = (),
) -> Decision:
    """What to do with producer ``name``'s request for ``mode``. ``requested_epoch`` is the
    epoch it was granted before (a holder asking again after a reconnection), None for a new
    producer. ``holder_connected`` says whether the holder's connection is up. ``ahead``
    counts the requests waiting in line before this one; ``others`` names the producers of
    other names the brokers last reported connected to the topic's segments."""
    if mode not in EXCLUSIVE_MODES:
        return Refuse(
            Refusal.INVALID,
            f"{mode} producers need no grant: they open on each segment directly",
        )
    if not name:
        return Refuse(Refusal.INVALID, "an exclusive producer must have a name")
    problem = producer_name_problem(name)
    if problem is not None:  # a holder the segments' admin API would refuse to fence with
        return Refuse(Refusal.INVALID, f"producer_name: {problem}")
    if requested_epoch is not None:
        return _returning(hold, holder_connected, name, mode, requested_epoch, ahead, others)
    if hold.holder is None:
        if mode is ProducerAccessMode.EXCLUSIVE_WITH_FENCING:
            return TakeOver(hold.epoch + 1)
        return _claim(name, mode, hold.epoch + 1, ahead, others)
    if mode is ProducerAccessMode.EXCLUSIVE_WITH_FENCING:
        return TakeOver(hold.epoch + 1, hold.holder)
    if mode is ProducerAccessMode.WAIT_FOR_EXCLUSIVE:
        return Wait()
    state = "connected" if holder_connected else "disconnected, within its grace period"
    return Refuse(
        Refusal.BUSY,
        f"producer {hold.holder!r} holds the topic at epoch {hold.epoch} ({state})",
    )


def _claim(
    name: str, mode: ProducerAccessMode, epoch: int, ahead: int, others: Collection[str]
) -> Decision:
    """Exclusive or WaitForExclusive on a topic nobody holds."""
    others = sorted(set(others) - {name})
    if not ahead and not others:
        return Claim(epoch)
    if mode is ProducerAccessMode.WAIT_FOR_EXCLUSIVE:
        return Wait()
    if ahead:
        return Refuse(
            Refusal.BUSY,
            f"{ahead} WaitForExclusive producer(s) wait for the topic before {name!r}",
        )
    listed = ", ".join(repr(other) for other in others)
    return Refuse(
        Refusal.BUSY,
        f"other producers are connected to the topic ({listed}): an Exclusive producer "
        "needs it to itself; retry later, or use WaitForExclusive",
    )


def _returning(
    hold: ProducerHold,
    holder_connected: bool,
    name: str,
    mode: ProducerAccessMode,
    requested_epoch: int,
    ahead: int,
    others: Collection[str],
) -> Decision:
    if requested_epoch > hold.epoch or requested_epoch == 0:  # grants start at epoch 1
        return Refuse(
            Refusal.INVALID,
            f"no grant was made at epoch {requested_epoch}: the topic is at epoch {hold.epoch}",
        )
    if requested_epoch < hold.epoch:
        taken = f"by {hold.holder!r}" if hold.holder else "and released since"
        return Refuse(
            Refusal.FENCED,
            f"producer {name!r} held epoch {requested_epoch}, but the topic was taken over "
            f"at epoch {hold.epoch} {taken}: create a new producer",
        )
    if hold.holder is None:
        # The last holder; nobody took the topic after it. It gets its epoch back as it was
        # granted: taking over only with fencing, else only while nobody else produces.
        if mode is ProducerAccessMode.EXCLUSIVE_WITH_FENCING:
            return Resume(requested_epoch)
        return _claim(name, mode, requested_epoch, ahead, others)
    if hold.holder != name:
        return Refuse(
            Refusal.FENCED,
            f"epoch {requested_epoch} belongs to producer {hold.holder!r}, not {name!r}",
        )
    if holder_connected:
        return Refuse(
            Refusal.BUSY,
            f"producer {name!r} is connected through another request; retry once the "
            "controller has seen that connection drop",
        )
    return Resume(requested_epoch)


@dataclass(frozen=True, slots=True)
class FenceTargets:
    """The segments a grant fences. ``required``: every one must be fenced before the grant is
    reported. ``if_present``: fenced if their storage exists; one not made yet will be made
    with the new epoch."""

    required: frozenset[int]
    if_present: frozenset[int]


def fence_targets(
    layout: SegmentLayout | None, pending_children: Iterable[int], children_created: bool
) -> FenceTargets:
    """The Active segments are required. So are the children of a pending split or merge once
    ``ChildrenCreated`` is recorded: they will be committed as they are. Before that they are
    fenced if present: the operation's next compare-and-swap of the topic conflicts with the
    grant's, so it reads the topic again and makes them (again, idempotently) at the new epoch."""
    active = frozenset(s.segment_id for s in layout.active) if layout is not None else frozenset()
    children = frozenset(pending_children) - active
    if children_created:
        return FenceTargets(active | children, frozenset())
    return FenceTargets(active, children)
