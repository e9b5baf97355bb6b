"""Spark reads and writes topics: the ``sluice`` PySpark data source and the session the project uses.

``register(spark)`` makes ``format("sluice")`` available on a session (``spark_session()`` does it for
you; an installed Sluice also registers it by itself, through the ``pyspark_sluice`` module Spark
discovers). Nothing here imports Django: Spark executors import this package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def register(spark: SparkSession) -> None:
    """Register the ``sluice`` data source on ``spark`` (and the Kafka sink's save modes, see ``savemode``)."""
    from dataplane.client.spark.savemode import install
    from dataplane.client.spark.source import SluiceDataSource

    install()
    spark.dataSource.register(SluiceDataSource)
