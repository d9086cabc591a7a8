"""A real ``stctl kube-api`` process on loopback: the Kubernetes API over an embedded store,
with a kubeconfig that the kubernetes store adapter and kubectl use. Its clients are the admin
of a single token (kept in ``root``), or the users of a token file in kube-apiserver's format
(``token_auth_file``: the kubeconfig then carries its first line's token). With ``audit_log``
it logs every request there (``scalable_topics.kubeapi.audit.read_audit_log`` reads it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from .child_process import kill, terminate
from .ports import reported_address


class KubeApiProcess:
    def __init__(
        self,
        root: Path,
        store_url: str,
        *,
        namespaces: tuple[str, ...] = (),
        install_crds: bool = True,
        port: int = 0,
        token_auth_file: Path | None = None,
        audit_log: Path | None = None,
    ) -> None:
        self.root = root
        self.store_url = store_url
        self.namespaces = namespaces
        self.install_crds = install_crds
        self.port = port  # 0: a free one, kept by a restart
        self.address_file = root / "kube-api.address"
        self.kubeconfig = root / "kubeconfig"
        self.token_file = root / "kube-api.token"
        self.token_auth_file = token_auth_file
        self.audit_log = audit_log
        self.log_path = root / "kube-api.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def adapter_url(self) -> str:
        """The store URL of the kubernetes adapter, through this server."""
        return f"kubernetes://{self.kubeconfig}"

    async def start(self) -> str:
        """Start the server; return its URL once it listens."""
        self.address_file.unlink(missing_ok=True)
        arguments = [
            sys.executable,
            "-m",
            "scalable_topics.cli",
            "kube-api",
            "--store",
            self.store_url,
            "--port",
            str(self.port),
            "--address-file",
            str(self.address_file),
            "--kubeconfig",
            str(self.kubeconfig),
        ]
        if self.token_auth_file is not None:
            arguments += ["--token-auth-file", str(self.token_auth_file)]
        else:
            arguments += ["--token-file", str(self.token_file)]
        if self.audit_log is not None:
            arguments += ["--audit-log", str(self.audit_log)]
        for namespace in self.namespaces:
            arguments += ["--namespace", namespace]
        if not self.install_crds:
            arguments.append("--no-crds")
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                arguments,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        host, self.port = await reported_address(self.address_file, self.process, self.log_path)
        return f"https://{host}:{self.port}"

    def stop(self) -> None:
        terminate(self.process)

    def kill(self) -> None:
        kill(self.process)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")
