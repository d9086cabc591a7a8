"""``stctl config view|get-contexts|use-context``: the client configuration file, and the
settings every client command resolves from its flags, the environment and that file
(docs/client-config.md). A file that cannot be used is one line on stderr and exit 2."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, TypeAlias

from ..client.client_config import ClientConfigError, load_client_config, use_context
from ..client.client_settings import CONFIG_VARIABLE, default_config_path, find_config
from .admin_call import (
    add_config_arguments,
    add_config_file_argument,
    add_namespace_argument,
    add_output_argument,
    settings_of,
)
from .output import fail, print_json, print_table

Subcommands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
VIEW, GET_CONTEXTS, USE_CONTEXT = (
    "stctl config view",
    "stctl config get-contexts",
    "stctl config use-context",
)


def _no_file() -> str:
    return f"no --config, ${CONFIG_VARIABLE} or {default_config_path(os.environ)}"


def _run_view(args: argparse.Namespace) -> int:
    try:
        settings = settings_of(args)
    except ClientConfigError as error:
        return fail(VIEW, str(error), exit_code=2)
    config = None if settings.config_path is None else str(settings.config_path)
    if args.output == "json":
        print_json(
            {
                "config": config,
                "configFrom": settings.config_from,
                "context": settings.context,
                "contextFrom": settings.context_from,
                "serviceUrl": settings.service_url,
                "serviceUrlFrom": settings.service_url_from,
                "namespace": settings.namespace,
                "namespaceFrom": settings.namespace_from,
                "tokenSet": settings.auth_token is not None,
                "tokenFrom": settings.auth_token_from,
            }
        )
        return 0
    # Never the token itself: whether there is one, and where it comes from.
    token = "set" if settings.auth_token is not None else "not set"
    print_table(
        ("SETTING", "VALUE", "FROM"),
        [
            ("config", config, settings.config_from or _no_file()),
            ("context", settings.context, settings.context_from),
            ("url", settings.service_url, settings.service_url_from),
            ("namespace", settings.namespace, settings.namespace_from),
            ("token", token, settings.auth_token_from),
        ],
    )
    return 0


def _config_file(args: argparse.Namespace) -> Path | None:
    found = find_config(args.config, os.environ)
    return None if found is None else found[0]


def _run_get_contexts(args: argparse.Namespace) -> int:
    try:
        path = _config_file(args)
        loaded = None if path is None else load_client_config(path)
    except ClientConfigError as error:
        return fail(GET_CONTEXTS, str(error), exit_code=2)
    contexts: list[dict[str, Any]] = []
    if loaded is not None:
        for named in loaded.config.contexts:
            context = named.context
            contexts.append(
                {
                    "name": named.name,
                    "current": named.name == loaded.config.current_context,
                    "cluster": context.cluster,
                    "serviceUrl": loaded.cluster(context.cluster).service_url,
                    "user": context.user,
                    "namespace": context.namespace,
                }
            )
    if args.output == "json":
        print_json(contexts)
    elif loaded is None:
        print(f"no contexts: no client configuration file ({_no_file()})")
    elif not contexts:
        print(f"no contexts in {loaded.path}")
    else:
        print_table(
            ("CURRENT", "NAME", "CLUSTER", "USER", "NAMESPACE"),
            [
                ("*" if c["current"] else "", c["name"], c["cluster"], c["user"], c["namespace"])
                for c in contexts
            ],
        )
    return 0


def _run_use_context(args: argparse.Namespace) -> int:
    try:
        path = _config_file(args)
    except ClientConfigError as error:
        return fail(USE_CONTEXT, str(error), exit_code=2)
    if path is None:
        message = f"no client configuration file to change ({_no_file()})"
        return fail(USE_CONTEXT, message, exit_code=2)
    try:
        use_context(path, args.name)
    except ClientConfigError as error:
        return fail(USE_CONTEXT, str(error), exit_code=2)
    except OSError as error:  # the file was read, but cannot be replaced
        return fail(USE_CONTEXT, f"cannot write {path}: {error.strerror}")
    print(f"switched to context {args.name!r} in {path}")
    return 0


def add_config(commands: Subcommands) -> None:
    group = commands.add_parser(
        "config",
        help="show the client settings; list and switch the contexts of the configuration file",
        description="The client configuration file (--config FILE, else $STCTL_CONFIG, else "
        "~/.config/stctl/config) names clusters, users and contexts as a kubeconfig does; every "
        "client command takes its URL, token and namespace from a flag, else $STCTL_URL and "
        "$STCTL_AUTH_TOKEN, else the context, else the defaults. See docs/client-config.md.",
    )

    def usage(_: argparse.Namespace) -> int:
        group.print_help(sys.stderr)
        return 2

    group.set_defaults(run=usage)
    actions = group.add_subparsers(title="config commands", metavar="COMMAND")
    view = actions.add_parser(
        "view",
        help="the URL, namespace and token a client command would use, and where each comes from",
        description="Print the settings a client command given the same flags would use: the "
        "configuration file and context, the URL, the namespace, and whether a token is set "
        "and where it comes from (never the token itself).",
    )
    view.add_argument("--url", help="as a client command's --url")
    view.add_argument("--auth-token", help="as a client command's --auth-token")
    add_namespace_argument(view)
    add_config_arguments(view)
    add_output_argument(view)
    view.set_defaults(run=_run_view)
    get_contexts = actions.add_parser(
        "get-contexts",
        help="list the contexts of the configuration file (* marks the current one)",
        description="List the contexts of the configuration file: name, cluster, user and "
        "namespace; * marks the current one.",
    )
    add_config_file_argument(get_contexts)
    add_output_argument(get_contexts)
    get_contexts.set_defaults(run=_run_get_contexts)
    use = actions.add_parser(
        "use-context",
        help="make a context the current one",
        description="Set the configuration file's current-context to NAME. The file is "
        "replaced atomically and keeps its mode; comments are not kept (as with kubectl).",
    )
    use.add_argument("name", metavar="NAME", help="a context of the file")
    add_config_file_argument(use)
    use.set_defaults(run=_run_use_context)
