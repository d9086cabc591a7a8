"""The pure domain: hashing, ranges, the segment DAG and the resources. No I/O here."""
