"""``stctl kube-api``: the Kubernetes API over a store, as its own process."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

COMMAND = "stctl kube-api"


def _run_kube_api(args: argparse.Namespace) -> int:
    import asyncio
    import logging
    import signal

    from ..kubeapi.running import KubeApiSettings, start_kube_api
    from ..kubeapi.status import ApiError
    from ..listening import listening_socket, write_address_file
    from ..store import StoreError

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    if not 0 <= args.port <= 65535:
        print(f"{COMMAND}: --port {args.port} is not within 0-65535", file=sys.stderr)
        return 2
    settings = KubeApiSettings(
        store_url=args.store,
        token_file=Path(args.token_file) if args.token_file else None,
        token_auth_file=Path(args.token_auth_file) if args.token_auth_file else None,
        kubeconfig=Path(args.kubeconfig) if args.kubeconfig else None,
        install_crds=not args.no_crds,
        namespaces=tuple(args.namespace),
        audit_log=Path(args.audit_log) if args.audit_log else None,
    )
    try:
        sock = listening_socket(args.host, args.port)
    except OSError as error:
        print(f"{COMMAND}: cannot listen on {args.host}:{args.port}: {error}", file=sys.stderr)
        return 1

    async def serve() -> int:
        stopping = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stopping.set)
        try:
            running = await start_kube_api(settings, sock)
        except ValueError as error:  # a store URL no adapter serves, a malformed token file
            print(f"{COMMAND}: {error}", file=sys.stderr)
            return 2
        except (OSError, StoreError, ApiError) as error:
            print(f"{COMMAND}: cannot start: {error}", file=sys.stderr)
            return 1
        try:
            host, port = sock.getsockname()[:2]
            if args.address_file:
                write_address_file(Path(args.address_file), host, port)
            print(f"{COMMAND}: serving {running.url}", flush=True)
            if settings.kubeconfig is not None:
                print(f"  KUBECONFIG={settings.kubeconfig} kubectl get st", flush=True)
            await stopping.wait()
            return 0
        finally:
            await running.stop()

    try:
        return asyncio.run(serve())
    finally:
        sock.close()


def add_kube_api(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "kube-api",
        help="serve the Kubernetes API over a store (kubectl works against it)",
        description="Serve the Kubernetes API over a store: discovery, OpenAPI, CRDs, "
        "ScalableTopics, Segments, Leases, Events and Namespaces, with the API server's "
        "semantics. Clients authenticate with the bearer token in --token-file, or with one of "
        "the users' tokens in --token-auth-file.",
    )
    parser.add_argument("--store", required=True, metavar="URL", help="the store to serve")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument(
        "--port", type=int, default=6443, help="port to listen on (default 6443; 0: a free port)"
    )
    who = parser.add_mutually_exclusive_group(required=True)
    who.add_argument(
        "--token-file",
        metavar="PATH",
        help="the bearer token clients must present (user admin, group system:masters); "
        "created (mode 0600) when missing",
    )
    who.add_argument(
        "--token-auth-file",
        metavar="PATH",
        help="users by bearer token, in kube-apiserver's format: one line per user, "
        'token,user,uid[,"group1,group2"]; the kubeconfig carries the first line\'s token',
    )
    parser.add_argument(
        "--audit-log",
        metavar="PATH",
        help="append one JSON line per request answered there: user, groups, verb, apiGroup, "
        "resource, subresource, namespace, name, nonResourceURL, code, dryRun",
    )
    parser.add_argument(
        "--kubeconfig", metavar="PATH", help="write a kubeconfig for this server there"
    )
    parser.add_argument(
        "--address-file", metavar="PATH", help="write HOST:PORT there once listening"
    )
    parser.add_argument(
        "--namespace",
        action="append",
        default=[],
        metavar="NS",
        help="create this namespace at start (repeatable)",
    )
    parser.add_argument(
        "--no-crds",
        action="store_true",
        help="do not install this release's CRDs at start (apply crds/ yourself)",
    )
    parser.set_defaults(run=_run_kube_api)
