"""One SparkSession for every load job test: starting one costs seconds to tens of seconds."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from scalable_topics.loadjob.session import spark_session

    session = spark_session("local[2]", app_name="scalable-topics-load-tests")
    yield session
    session.stop()
