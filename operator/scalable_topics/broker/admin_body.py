"""Request bodies of the broker's admin APIs (topics and segments): strict and bounded.

Strict: JSON parsed in pydantic's strict mode, so no value of one type is taken for another
(``"0"`` is not 0, ``true`` is not 1, ``1.0`` is not 1), and an unknown field is refused: a
client's mistake is a 400 naming the field, never a guess.

Bounded: each body model says how many bytes it may have (``MAX_BYTES``), checked before
anything is parsed. Parsing holds the interpreter whole (pydantic's parser, like ``json``,
keeps the GIL, so a thread would not spare the event loop), and the bound is what keeps it
short: the worst body of the largest bound, tiny items packed to the last byte, parses in
tens of milliseconds (``benchmarks/bench_admin_put.py``). The largest bodies a client needs
fit: a topic declaring MAX_SUBSCRIPTIONS_PER_TOPIC subscriptions of 128 characters in
TOPIC_BODY_MAX_BYTES, a segment created with MAX_SEGMENT_SUBSCRIPTIONS in
SEGMENT_BODY_MAX_BYTES.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, ClassVar, Final, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationError
from pydantic.alias_generators import to_camel

from ..admin.topics import validation_message
from ..model.resources import producer_name_problem, subscription_name_problem

SMALL_BODY_MAX_BYTES: Final = 4 * 1024  # a split, a merge, a fence, a subscription
TOPIC_BODY_MAX_BYTES: Final = 256 * 1024
SEGMENT_BODY_MAX_BYTES: Final = 512 * 1024
# The application's own bound (aiohttp's client_max_size): no route reads more than this.
BODY_MAX_BYTES: Final = max(SMALL_BODY_MAX_BYTES, TOPIC_BODY_MAX_BYTES, SEGMENT_BODY_MAX_BYTES)


class AdminBody(BaseModel):
    """camelCase fields (snake_case taken too), unknown fields refused, types strict."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", strict=True
    )
    MAX_BYTES: ClassVar[int] = SMALL_BODY_MAX_BYTES


B = TypeVar("B", bound=AdminBody)


def _rule(problem_of: Callable[[str], str | None]) -> AfterValidator:
    def check(value: str) -> str:
        problem = problem_of(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    return AfterValidator(check)


# Names by the rules of every other surface (model/resources.py), refused naming the field.
SubscriptionName = Annotated[str, _rule(subscription_name_problem)]
ProducerName = Annotated[str, _rule(producer_name_problem)]


class BodyTooLarge(ValueError):
    """A body over its bound: answered 413."""


def parse_body(raw: bytes, model: type[B]) -> B:
    """The body as ``model``; BodyTooLarge past ``model.MAX_BYTES``, ValueError naming the
    field (``invalid request body: segment: Input should be a valid integer``) otherwise. An
    empty body is ``{}``: the model's defaults, if it has them."""
    if len(raw) > model.MAX_BYTES:
        raise BodyTooLarge(f"invalid request body: at most {model.MAX_BYTES} bytes, not {len(raw)}")
    try:
        return model.model_validate_json(raw or b"{}")
    except ValidationError as error:
        raise ValueError(validation_message(error, "request body")) from None
