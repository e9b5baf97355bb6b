"""Spark's automatic discovery of Python data sources: a module named ``pyspark_*`` with a ``DefaultSource``.

Spark imports every such module on its Python path when it first looks up a data source, so an
installed Sluice serves ``format("sluice")`` without ``register(spark)``.
"""

from dataplane.client.spark.source import SluiceDataSource as DefaultSource

__all__ = ["DefaultSource"]
