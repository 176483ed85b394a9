"""What manent sends a plugin and what it gets back (mirrors proto/manent/plugin/v1)."""

import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from ._proto import deployer_pb2 as pb


@dataclass
class Artifact:
    """What to deploy."""

    type: str = ""
    name: str = ""
    version: str = ""
    uri: str = ""
    sha256: str = ""

    @classmethod
    def from_wire(cls, w: "pb.Artifact") -> "Artifact":
        return cls(type=w.type, name=w.name, version=w.version, uri=w.uri, sha256=w.sha256)

    def to_wire(self) -> "pb.Artifact":
        return pb.Artifact(type=self.type, name=self.name, version=self.version, uri=self.uri,
                           sha256=self.sha256)


@dataclass
class Target:
    """One target: the address the plugin acts on, its moniker and labels."""

    host: str
    moniker: str = ""
    labels: Dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """The target's name: the moniker's last part (`web-1` of `prod::web::host::web-1`)."""
        return self.moniker.split("::")[-1] if self.moniker else self.host


class TargetResult:
    """How one target ended up after a call."""

    DEPLOYED = "deployed"
    FAILED = "failed"
    SKIPPED = "skipped"
    UNCHANGED = "unchanged"
    ROLLED_BACK = "rolled_back"

    def __init__(self, host: str, status: str, message: str = "", duration_ms: int = 0):
        self.host = host
        self.status = status
        self.message = message
        self.duration_ms = duration_ms

    def __repr__(self) -> str:
        return "TargetResult(%r, %r, %r, %r)" % (self.host, self.status, self.message,
                                                 self.duration_ms)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TargetResult) and vars(self) == vars(other)

    def to_wire(self) -> "pb.TargetResult":
        return pb.TargetResult(host=self.host, status=self.status, message=self.message,
                               duration_ms=int(self.duration_ms))


@dataclass
class Result:
    """A Deploy/DryRun/Rollback/DeployCandidate answer: the release and one result per target."""

    targets: List[TargetResult] = field(default_factory=list)
    release: str = ""
    plugin: str = ""

    def to_wire(self, default_plugin: str) -> "pb.DeployResponse":
        return pb.DeployResponse(plugin=self.plugin or default_plugin, release=self.release,
                                 targets=[t.to_wire() for t in self.targets])


@dataclass
class Release:
    """A release a target can be switched to (rollback's destination)."""

    version: str = ""
    artifact: Artifact = field(default_factory=Artifact)
    deployment_id: str = ""

    @classmethod
    def from_wire(cls, w: "pb.Release") -> "Release":
        return cls(version=w.version, artifact=Artifact.from_wire(w.artifact),
                   deployment_id=w.deployment_id)


@dataclass
class TargetRelease:
    """What a target reports as live; version "" when the plugin cannot tell."""

    host: str
    version: str = ""


@dataclass
class Pool:
    """One side of a canary's split: a slot, the release it holds, its servers' addresses."""

    slot: str = ""
    version: str = ""
    addresses: List[str] = field(default_factory=list)

    @classmethod
    def from_wire(cls, w: "pb.Pool") -> "Pool":
        return cls(slot=w.slot, version=w.version, addresses=list(w.addresses))

    def to_wire(self) -> "pb.Pool":
        return pb.Pool(slot=self.slot, version=self.version, addresses=list(self.addresses))


@dataclass
class Routing:
    """A canary's routing: manent's record of it, or what a running router serves."""

    stable: Optional[Pool] = None
    candidate: Optional[Pool] = None
    weight: int = 0
    testers: bool = False
    scale: int = 100
    retired: bool = False

    @classmethod
    def from_wire(cls, w: "pb.Routing") -> "Routing":
        return cls(
            stable=Pool.from_wire(w.stable) if w.HasField("stable") else None,
            candidate=Pool.from_wire(w.candidate) if w.HasField("candidate") else None,
            weight=w.weight, testers=w.testers, scale=w.scale or 100, retired=w.retired)

    def to_wire(self) -> "pb.Routing":
        w = pb.Routing(weight=self.weight, testers=self.testers, scale=self.scale,
                       retired=self.retired)
        if self.stable is not None:
            w.stable.CopyFrom(self.stable.to_wire())
        if self.candidate is not None:
            w.candidate.CopyFrom(self.candidate.to_wire())
        return w


@dataclass
class RoutingState:
    """RoutingState's answer: what the router serves; `foreign` says why it is not manent's."""

    routing: Routing = field(default_factory=Routing)
    foreign: str = ""


class Request:
    """Everything a call is about. Secrets can be read only while the call runs."""

    def __init__(self, wire: "pb.DeployRequest", secrets: Any = None):
        self.wire = wire
        self.deployment_id: str = wire.deployment_id
        self.application: str = wire.application
        self.environment: str = wire.environment
        self.artifact = Artifact.from_wire(wire.artifact)
        self.targets: List[Target] = [
            Target(host=t.host, moniker=t.moniker, labels=dict(t.labels)) for t in wire.targets
        ]
        self.raw_params: bytes = bytes(wire.params_json)
        self.params: Dict[str, Any] = _json_object(self.raw_params, "params_json")
        self.traffic: Any = json.loads(wire.traffic) if wire.traffic else None
        self.routing: Optional[Routing] = (
            Routing.from_wire(wire.routing) if wire.HasField("routing") else None)
        self.idempotency_key: str = wire.idempotency_key
        self.attempt: int = wire.attempt
        self.parallelism: int = wire.parallelism or 1
        self.secrets_broker_id: int = wire.secrets_broker_id
        self._secrets = secrets

    @property
    def log(self) -> Any:
        """The plugin's logger; during a call every line it logs names the call's deployment
        (and its target when the call has one), as any logger of the plugin's does."""
        from .log import logger
        return logger()

    def target_log(self, target: "Target") -> Any:
        """The plugin's logger for lines about `target`."""
        from .log import TargetLog, logger
        return TargetLog(logger(), {"target": target.name, "moniker": target.moniker})

    async def secret(self, name: str) -> str:
        """The secret `name` (declared under the deploy's `secrets:`), read from manent.

        Raises `Permanent` when manent refuses it, when the call has no secrets, or once the
        call has returned.
        """
        from .errors import Permanent

        if self._secrets is None:
            raise Permanent("secret `%s` is not available: this call has no secrets "
                            "(declare it under the deploy's `secrets:`)" % name)
        return await self._secrets.secret(name)

    def __repr__(self) -> str:
        return "Request(%s %s/%s %s, %d targets, attempt %d)" % (
            self.deployment_id, self.application, self.environment, self.artifact.version,
            len(self.targets), self.attempt)


def _json_object(raw: bytes, what: str) -> Dict[str, Any]:
    if not raw:
        return {}
    value = json.loads(raw)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError("%s is not a JSON object" % what)
    return value
