"""A Kubernetes API server over the store port, for the kinds this system uses: kubectl and
Kubernetes clients work against standalone mode, and CI tests the Kubernetes path on it."""
