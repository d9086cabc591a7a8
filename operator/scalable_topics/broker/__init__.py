"""The data plane: segment logs, producers, subscriptions and dispatch, sessions, admin API."""
