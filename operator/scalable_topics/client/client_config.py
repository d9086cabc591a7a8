"""The client configuration file: kubeconfig-shaped YAML naming clusters (service URLs), users
(tokens) and contexts (a cluster, a user, a namespace), one of them current.

    apiVersion: scalabletopics.dev/v1
    kind: ClientConfig
    current-context: standalone
    clusters:
    - name: standalone
      cluster: {service-url: "ws://127.0.0.1:6650"}
    users:
    - name: admin
      user: {token-file: admin.token}
    contexts:
    - name: standalone
      context: {cluster: standalone, user: admin, namespace: default}

Loading checks the whole file and refuses it with one message naming the file and the field.
A user's token file is read only when settings are resolved (client_settings.py), so the next
command picks up a rotated token. docs/client-config.md describes every field.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import ErrorDetails

from ..model.resources import namespace_problem
from ..private_files import replace_file
from .service_urls import parse_service_urls

API_VERSION = "scalabletopics.dev/v1"
KIND = "ClientConfig"
# A token is a line of text; a file much larger than any token is the wrong file.
MAX_TOKEN_FILE_BYTES = 65536


class ClientConfigError(ValueError):
    """A configuration that cannot be used; the message names the file and the field."""


def _at(path: Path, field: str, problem: str) -> ClientConfigError:
    return ClientConfigError(f"{path}: {field}: {problem}" if field else f"{path}: {problem}")


# -- the format ---------------------------------------------------------------------------------


class _Section(BaseModel):
    """A mapping of the file: its known fields only, each refused with the ones it may have."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    what: ClassVar[str]

    @model_validator(mode="before")
    @classmethod
    def _known_fields(cls, data: Any) -> Any:
        if isinstance(data, dict):
            known = [field.alias or name for name, field in cls.model_fields.items()]
            for key in data:
                if key not in known:
                    raise ValueError(f"unknown field {key!r} ({cls.what} has {', '.join(known)})")
        return data


def _named(value: str) -> str:
    if not value:
        raise ValueError("must not be empty")
    return value


def _one_word(value: str, what: str) -> str:
    if not value or len(value.split()) != 1 or value != value.strip():
        raise ValueError(f"{what} must be one word (a token), without spaces or line breaks")
    return value


class Cluster(_Section):
    what = "a cluster"
    service_url: str = Field(alias="service-url")

    @field_validator("service_url")
    @classmethod
    def _service_url(cls, value: str) -> str:
        parse_service_urls(value)
        return value


class User(_Section):
    what = "a user"
    token: str | None = None
    token_file: str | None = Field(default=None, alias="token-file")

    @field_validator("token")
    @classmethod
    def _token(cls, value: str | None) -> str | None:
        return None if value is None else _one_word(value, "a token")

    @field_validator("token_file")
    @classmethod
    def _token_file(cls, value: str | None) -> str | None:
        return None if value is None else _named(value)

    @model_validator(mode="after")
    def _one_source(self) -> User:
        if self.token is not None and self.token_file is not None:
            raise ValueError("give token or token-file, not both")
        return self


class Context(_Section):
    what = "a context"
    cluster: str
    user: str | None = None
    namespace: str | None = None

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, value: str | None) -> str | None:
        problem = None if value is None else namespace_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value


class _Entry(_Section):
    """An entry of clusters, users or contexts: its name, then what it names."""

    name: str

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return _named(value)


class NamedCluster(_Entry):
    what = "a clusters entry"
    cluster: Cluster


class NamedUser(_Entry):
    what = "a users entry"
    user: User


class NamedContext(_Entry):
    what = "a contexts entry"
    context: Context


class ClientConfig(_Section):
    what = "a client config"
    api_version: str = Field(alias="apiVersion")
    kind: str
    current_context: str | None = Field(default=None, alias="current-context")
    clusters: tuple[NamedCluster, ...] = ()
    users: tuple[NamedUser, ...] = ()
    contexts: tuple[NamedContext, ...] = ()

    @field_validator("api_version")
    @classmethod
    def _api_version(cls, value: str) -> str:
        if value != API_VERSION:
            raise ValueError(f"expected {API_VERSION!r}, not {value!r}")
        return value

    @field_validator("kind")
    @classmethod
    def _kind(cls, value: str) -> str:
        if value != KIND:
            kubeconfig = " (a kubeconfig is not a client config)" if value == "Config" else ""
            raise ValueError(f"expected {KIND!r}, not {value!r}{kubeconfig}")
        return value

    @field_validator("clusters", "users", "contexts", mode="before")
    @classmethod
    def _empty_list(cls, value: Any) -> Any:
        return () if value is None else value  # `users:` with no entries under it


def _problem(error: ErrorDetails) -> tuple[str, str]:
    """The field (its spelling in the file) and what is wrong with it, in a few words."""
    field = ".".join(str(part) for part in error["loc"])
    kind = error["type"]
    if kind == "value_error":  # a check of ours: its message, without pydantic's prefix
        message = str(error.get("ctx", {}).get("error", error["msg"]))
    elif kind == "missing":
        message = "required"
    elif kind in ("model_type", "model_attributes_type", "dict_type"):
        message = f"expected a mapping, not {error['input']!r}"
    elif kind in ("tuple_type", "list_type"):
        message = f"expected a list, not {error['input']!r}"
    elif kind == "string_type":
        message = f"expected a string, not {error['input']!r}"
    else:
        message = error["msg"]
    return field, message


# -- loading ------------------------------------------------------------------------------------


class _Loader(yaml.SafeLoader):
    """YAML that refuses a key given twice in one mapping (PyYAML keeps the last silently)."""


def _unique_mapping(loader: _Loader, node: yaml.MappingNode, deep: bool = False) -> Any:
    seen: set[object] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        try:
            duplicate = key in seen
            seen.add(key)
        except TypeError:  # an unhashable key: construct_mapping says so
            break
        if duplicate:
            raise yaml.constructor.ConstructorError(
                None, None, f"the key {key!r} is given twice", key_node.start_mark
            )
    return loader.construct_mapping(node, deep)


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _unique_mapping)


def _yaml(text: str | bytes) -> Any:
    return yaml.load(text, Loader=_Loader)  # a SafeLoader: plain data only


def parse_client_config(text: str | bytes, path: Path) -> ClientConfig:
    """The configuration in ``text`` (read from ``path``, which messages name); ClientConfigError
    for anything that is not a valid client configuration."""
    try:
        data = _yaml(text)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        raise _at(path, "", f"not valid YAML: {error.problem}{where}") from None
    except yaml.YAMLError as error:
        raise _at(path, "", f"not valid YAML: {error}") from None
    if not isinstance(data, dict):
        found = "the file is empty" if data is None else f"not {type(data).__name__}"
        raise _at(
            path, "", f"expected a mapping with apiVersion: {API_VERSION} and kind: {KIND}; {found}"
        )
    try:
        config = ClientConfig.model_validate(data)
    except ValidationError as error:
        raise _at(path, *_problem(error.errors()[0])) from None
    _check_names(config, path)
    return config


def _check_names(config: ClientConfig, path: Path) -> None:
    """Names are unique in their list, and what a context or current-context names exists."""
    sections: Sequence[tuple[str, Sequence[NamedCluster | NamedUser | NamedContext]]] = (
        ("clusters", config.clusters),
        ("users", config.users),
        ("contexts", config.contexts),
    )
    for section, entries in sections:
        first: dict[str, int] = {}
        for index, entry in enumerate(entries):
            if entry.name in first:
                raise _at(
                    path,
                    f"{section}.{index}.name",
                    f"{entry.name!r} is also the name of {section}.{first[entry.name]}",
                )
            first[entry.name] = index
    clusters = [c.name for c in config.clusters]
    users = [u.name for u in config.users]
    for index, named in enumerate(config.contexts):
        where = f"contexts.{index}.context"
        if named.context.cluster not in clusters:
            raise _at(
                path, f"{where}.cluster", _missing("cluster", named.context.cluster, clusters)
            )
        if named.context.user is not None and named.context.user not in users:
            raise _at(path, f"{where}.user", _missing("user", named.context.user, users))
    contexts = [c.name for c in config.contexts]
    if config.current_context is not None and config.current_context not in contexts:
        raise _at(path, "current-context", _missing("context", config.current_context, contexts))


def _missing(what: str, name: str, names: Sequence[str]) -> str:
    known = f"{what}s: {', '.join(names)}" if names else f"the file has no {what}s"
    return f"no {what} named {name!r} ({known})"


@dataclass(frozen=True)
class ClientConfigFile:
    """A loaded configuration and the file it came from (relative token files are relative to
    its directory, and messages name it)."""

    path: Path
    config: ClientConfig

    def context(self, name: str | None = None) -> NamedContext:
        """The context ``name``, by default the current one; ClientConfigError when there is no
        such context, or no current one."""
        if name is None:
            name = self.config.current_context
            if name is None:
                raise _at(
                    self.path,
                    "current-context",
                    "not set: choose a context (stctl --context NAME, or stctl config "
                    "use-context NAME)",
                )
        for named in self.config.contexts:
            if named.name == name:
                return named
        contexts = [c.name for c in self.config.contexts]
        raise _at(self.path, "", _missing("context", name, contexts))

    def cluster(self, name: str) -> Cluster:
        return next(c.cluster for c in self.config.clusters if c.name == name)

    def user_index(self, name: str) -> int:
        return next(i for i, u in enumerate(self.config.users) if u.name == name)

    def token_file(self, user: str) -> Path | None:
        """Where the token of ``user`` is read from, or None for an inline token (or none)."""
        given = self.config.users[self.user_index(user)].user.token_file
        if given is None:
            return None
        return self.path.parent / Path(given).expanduser()  # an absolute one stays as it is

    def token(self, user: str) -> str | None:
        """The token of ``user``, its token file read now; ClientConfigError naming the field
        when the file cannot be read, is empty or holds more than a token."""
        index = self.user_index(user)
        named = self.config.users[index]
        path = self.token_file(user)
        if path is None:
            return named.user.token
        field = f"users.{index}.user.token-file"
        try:
            with path.open("rb") as file:
                data = file.read(MAX_TOKEN_FILE_BYTES + 1)
        except OSError as error:
            raise _at(self.path, field, f"cannot read {path}: {error.strerror}") from None
        if len(data) > MAX_TOKEN_FILE_BYTES:
            raise _at(self.path, field, f"{path} is larger than {MAX_TOKEN_FILE_BYTES} bytes")
        try:
            token = data.decode().strip()
        except UnicodeDecodeError:
            raise _at(self.path, field, f"{path} is not UTF-8 text") from None
        if not token:
            raise _at(self.path, field, f"{path} is empty")
        try:
            return _one_word(token, f"the token in {path}")
        except ValueError as error:
            raise _at(self.path, field, str(error)) from None


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as error:
        raise _at(path, "", f"cannot read it: {error.strerror}") from None


def load_client_config(path: Path) -> ClientConfigFile:
    """Read and check the configuration at ``path``; ClientConfigError naming the file (and
    the field) when it cannot be read or is not valid."""
    return ClientConfigFile(path, parse_client_config(_read(path), path))


# -- writing ------------------------------------------------------------------------------------


def write_client_config(
    path: str | os.PathLike[str],
    *,
    context: str,
    service_url: str,
    token_file: str | os.PathLike[str] | None = None,
    namespace: str | None = None,
) -> None:
    """Write a configuration of one context, current, named ``context`` (so are its cluster and,
    with ``token_file``, its user): the brokers at ``service_url`` (one URL or several
    comma-separated), the token read from ``token_file`` at each use (a relative path is
    relative to the directory of ``path``; the file need not exist yet), and ``namespace`` for
    bare topic names (``default`` when None). The file is replaced atomically (a new file
    renamed over it) and has mode 0600. ValueError naming the argument for a value the file
    could not hold: an empty ``context`` or ``token_file``, a malformed ``service_url``, a
    ``namespace`` that is not a DNS label."""
    target = Path(path)
    for argument, problem in (
        ("context", None if context else "must not be empty"),
        ("service_url", _url_problem(service_url)),
        (
            "token_file",
            "must not be empty" if token_file is not None and not str(token_file) else None,
        ),
        ("namespace", None if namespace is None else namespace_problem(namespace)),
    ):
        if problem is not None:
            raise ValueError(f"cannot write the client config {target}: {argument}: {problem}")
    selected: dict[str, str] = {"cluster": context}
    if token_file is not None:
        selected["user"] = context
    if namespace is not None:
        selected["namespace"] = namespace
    data: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "current-context": context,
        "clusters": [{"name": context, "cluster": {"service-url": service_url}}],
        "users": (
            [{"name": context, "user": {"token-file": os.fspath(token_file)}}]
            if token_file is not None
            else []
        ),
        "contexts": [{"name": context, "context": selected}],
    }
    text = _dump(data)
    parse_client_config(text, target)  # what is written loads
    replace_file(target, text.encode(), 0o600)


def _url_problem(service_url: str) -> str | None:
    try:
        parse_service_urls(service_url)
    except ValueError as error:
        return str(error)
    return None


# PyYAML folds NEL, LS and PS (line breaks to YAML) inside a plain or single-quoted scalar,
# so a name holding one would load back changed; double quotes keep them as escapes.
_FOLDED_BREAKS = frozenset("\x85\u2028\u2029")


class _Dumper(yaml.SafeDumper):
    pass


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = '"' if _FOLDED_BREAKS.intersection(value) else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _represent_str)


def _dump(data: dict[str, Any]) -> str:
    return yaml.dump(
        data, Dumper=_Dumper, sort_keys=False, default_flow_style=False, allow_unicode=True
    )


def use_context(path: Path, name: str) -> ClientConfigFile:
    """Make ``name`` the current context of the file at ``path``, which is replaced atomically
    and keeps its mode (comments are not kept: the file is written back from its data, as
    kubectl does). ClientConfigError when the file is not valid or has no such context."""
    text = _read(path)
    ClientConfigFile(path, parse_client_config(text, path)).context(name)  # valid, and has it
    data = _yaml(text)
    data["current-context"] = name
    written = _dump(data)
    replace_file(path, written.encode(), stat.S_IMODE(path.stat().st_mode))
    return ClientConfigFile(path, parse_client_config(written, path))
