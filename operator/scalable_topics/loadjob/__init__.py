"""The load job: per-segment windowed rates from the load history (Spark SQL), the autoscale
policy per topic, and the recommendations it writes to each topic's status.

Only this package imports PySpark (the ``spark`` extra); its pure modules (``windows``,
``policy_input``, ``recommendations``) import nothing of it, so they are tested without Spark.
"""
