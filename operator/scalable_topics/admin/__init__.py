"""Topic administration on the store and the brokers: what kubectl and the admin API do.

Creating, describing and deleting topics and subscriptions, split and merge requests, topic
stats, and the client of the brokers' segment admin API that the controller drives.
"""
