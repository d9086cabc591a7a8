"""``stctl operator``: the kopf operator, one replica of the operator Deployment.

kopf runs embedded in this process with the controller manager (kopf_app.py), and the
controller endpoint that brokers and clients reach is served beside it. The store is the
Kubernetes API, reached with the same credentials kopf uses.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .controller import add_controller_flags, host_port

COMMAND = "stctl operator"
LISTEN_DEFAULT = ("0.0.0.0", 6651)
HEALTH_DEFAULT = ("0.0.0.0", 8080)
# Set by the kubelet in every container: the pod's service account is the default then.
IN_CLUSTER_VARIABLE = "KUBERNETES_SERVICE_HOST"


def store_url(kubeconfig: Path | None, context: str | None) -> str:
    """The ``kubernetes:`` store URL of the flags: the pod's service account when run in a pod
    without a kubeconfig, else the kubeconfig (``$KUBECONFIG`` or ``~/.kube/config`` by
    default) and its context."""
    from urllib.parse import quote, urlencode

    query = "" if context is None else "?" + urlencode({"context": context})
    if kubeconfig is not None:
        return f"kubernetes://{quote(str(kubeconfig.resolve()))}{query}"
    if context is None and os.environ.get(IN_CLUSTER_VARIABLE):
        return "kubernetes:in-cluster"
    return f"kubernetes:{query}"


def _run_operator(args: argparse.Namespace) -> int:
    import asyncio
    import logging

    from ..controller.manager import ControllerManager
    from ..kopf_app import OperatorApp, RetriesAsWarnings, run_operator
    from ..store import open_store
    from ..store.kubernetes import parse_url
    from .controller import controller_config, listening
    from .server_checks import store_problem
    from .store_flags import store_budget

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    # kopf logs every handler call and every probe at INFO: a line per topic event, and one per
    # kubelet probe. Its warnings and errors are what an operator's log needs.
    for chatty in ("kopf.objects", "kopf.activities.probe"):
        logging.getLogger(chatty).setLevel(logging.WARNING)
    for handler in logging.getLogger().handlers:
        handler.addFilter(RetriesAsWarnings())
    url = store_url(args.kubeconfig, args.context)
    try:
        budget = store_budget(url, args.store_qps, args.store_burst)
        config = controller_config(args)
    except ValueError as error:
        print(f"{COMMAND}: {error}", file=sys.stderr)
        return 2
    try:
        config = listening(config, args.listen, args.address_file)
    except OSError as error:
        print(f"{COMMAND}: {error}", file=sys.stderr)
        return 1
    liveness = None
    if args.health_listen is not None:
        host, port = args.health_listen
        liveness = f"http://{'[' + host + ']' if ':' in host else host}:{port}/healthz"

    async def serve() -> int:
        problem = await store_problem(url)
        if problem is not None:
            if config.listen_socket is not None:
                config.listen_socket.close()
            print(f"{COMMAND}: {problem}", file=sys.stderr)
            return 1
        store = open_store(url, budget=budget)
        manager = ControllerManager(store, config, follow_topics=False)
        app = OperatorApp(manager, parse_url(url))
        try:
            await run_operator(app, liveness_endpoint=liveness)
        finally:
            await store.close()
        return 0

    return asyncio.run(serve())


def add_operator(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    operator = commands.add_parser(
        "operator",
        help="run the Kubernetes operator (kopf): a controller replica on the cluster's API",
        description="Run one replica of the operator: kopf, embedded, reports ScalableTopics to a "
        "controller that shares the topics with the other replicas through --shards ownership "
        "shards (one Lease each) and reconciles the topics of the shards it holds. The "
        "controller endpoint (--listen) serves brokers, /metrics and /readyz (ready once the "
        "caches are synced, unready while the API cannot be reached); kopf's liveness endpoint "
        "(--health-listen) serves /healthz with the replica's leadership and store health.",
    )
    operator.add_argument(
        "--kubeconfig",
        type=Path,
        metavar="FILE",
        help="the cluster's kubeconfig (default: the pod's service account when run in a pod, "
        "else $KUBECONFIG or ~/.kube/config)",
    )
    operator.add_argument(
        "--context", help="the kubeconfig context to use (default: its current context)"
    )
    operator.add_argument(
        "--health-listen",
        type=_optional_host_port,
        default=HEALTH_DEFAULT,
        metavar="HOST:PORT",
        help="serve kopf's liveness endpoint, /healthz, on this address (default "
        f"{HEALTH_DEFAULT[0]}:{HEALTH_DEFAULT[1]}; 'off': none)",
    )
    add_controller_flags(operator, listen_default=LISTEN_DEFAULT)
    operator.set_defaults(run=_run_operator)


def _optional_host_port(value: str) -> tuple[str, int] | None:
    return None if value == "off" else host_port(value)
