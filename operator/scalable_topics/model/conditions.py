"""Status conditions in the shape Kubernetes API conventions give them."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

ConditionStatus = Literal["True", "False", "Unknown"]


class Condition(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )

    type: str = Field(min_length=1, max_length=316, pattern=r"^([a-z0-9.-]+/)?[A-Za-z0-9_.-]+$")
    status: ConditionStatus
    reason: str = Field(
        min_length=1, max_length=1024, pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
    )
    message: str = Field(default="", max_length=32768)
    last_transition_time: datetime
    observed_generation: int | None = Field(default=None, ge=0)


def set_condition(conditions: list[Condition], new: Condition) -> list[Condition]:
    """Replace the condition of ``new.type``; keep its transition time unless the status moved."""
    result: list[Condition] = []
    replaced = False
    for old in conditions:
        if old.type != new.type:
            result.append(old)
            continue
        replaced = True
        if old.status == new.status:
            new = new.model_copy(update={"last_transition_time": old.last_transition_time})
        result.append(new)
    if not replaced:
        result.append(new)
    return result


def find_condition(conditions: list[Condition], condition_type: str) -> Condition | None:
    return next((c for c in conditions if c.type == condition_type), None)
