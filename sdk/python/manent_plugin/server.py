"""`serve(factory)`: go-plugin's plugin side over grpclib — magic cookie, version negotiation, a
Unix socket, AutoMTLS, health, controller, stdio, broker and the Deployer service.

Stdout carries only the handshake line: right after it fd 1 is pointed at fd 2, so a later
`print` ends up on stderr, which manent reads as log lines.
"""

import asyncio
import hashlib
import inspect
import json
import logging
import os
import secrets as _secrets
import signal
import threading
import sys
import tempfile
import time
from typing import Any, Awaitable, Callable, Dict, Iterable, List, Optional, Sequence

import grpclib.const
from grpclib.client import Channel
from grpclib.config import Configuration
from grpclib.const import Status
from grpclib.exceptions import GRPCError
from grpclib.server import Server

from . import tls
from ._proto import deployer_pb2 as pb
from ._proto import grpc_broker_pb2, grpc_controller_pb2, grpc_stdio_pb2  # noqa: F401
from ._proto import manent_plugin_health_pb2 as health_pb2
from ._proto.deployer_grpc import DeployerBase, SecretsStub
from ._proto.grpc_broker_grpc import GRPCBrokerBase
from ._proto.grpc_controller_grpc import GRPCControllerBase
from ._proto.grpc_stdio_grpc import GRPCStdioBase
from .deployer import CALLS, NotImplementedCall, capabilities, overrides
from .errors import Permanent
from .log import CALL, CALL_ENDED, TRACE, logger, module_name
from .types import Release, Request, Result, RoutingState, TargetRelease, TargetResult

MAGIC_COOKIE_KEY = "MANENT_PLUGIN"
MAGIC_COOKIE_VALUE = "d3c0ded-manent-plugin"
CORE_PROTOCOL_VERSION = 1
APP_PROTOCOL_VERSION = 1
CONFORMANCE_ENV = "MANENT_PLUGIN_CONFORMANCE"
CONFORMANCE_KEY = "manent_conformance"
BROKER_WAIT_S = 5.0

Factory = Callable[[Dict[str, Any], logging.Logger], Any]


def negotiate(offered: Optional[str], mine: Sequence[int]) -> int:
    """go-plugin's choice: the highest of `mine` the host offers, else the lowest of `mine`
    (which the host then refuses with a clear message)."""
    theirs = set()
    for part in (offered or "").split(","):
        part = part.strip()
        if part:
            try:
                theirs.add(int(part))
            except ValueError:
                pass
    for v in sorted(mine, reverse=True):
        if v in theirs:
            return v
    return min(mine)


#: How long whatever still runs when the plugin is told to stop gets before the process ends.
EXIT_WITHIN = 2.0


class _Stop:
    """Ends `serve` with an exit code."""

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.code = 0
        self._deadline: Optional[threading.Timer] = None

    def __call__(self, code: int = 0) -> None:
        if not self.event.is_set():
            self.code = code
            self.event.set()

    def deadline(self, code: int) -> None:
        """Ends the process with `code` after EXIT_WITHIN seconds, on a thread of its own: a
        coroutine that blocks the event loop cannot hold the exit back. Once."""
        if self._deadline is None:
            self._deadline = threading.Timer(EXIT_WITHIN, os._exit, (code,))
            self._deadline.daemon = True
            self._deadline.start()


# ------------------------------------------------------------------------------------ broker


class _Broker(GRPCBrokerBase):
    """go-plugin's GRPCBroker, plugin side: remembers where the host serves each brokered id."""

    def __init__(self, stop: _Stop) -> None:
        self.known: Dict[int, Any] = {}
        self.arrived = asyncio.Condition()
        self.client_ssl: Any = None
        self.stop = stop

    async def StartStream(self, stream: Any) -> None:
        # Headers at once: the host's call returns when they arrive.
        await stream.send_initial_metadata()
        async for info in stream:
            async with self.arrived:
                self.known[info.service_id] = info
                self.arrived.notify_all()
        # The plugin never announces services; the stream stays open while the plugin runs.
        await self.stop.event.wait()

    async def wait_for(self, service_id: int) -> Any:
        """The ConnInfo of `service_id`, waiting up to 5 s (go-plugin's limit)."""
        async with self.arrived:
            try:
                await asyncio.wait_for(
                    self.arrived.wait_for(lambda: service_id in self.known), BROKER_WAIT_S)
            except asyncio.TimeoutError:
                raise RuntimeError("the host never announced broker service %d" % service_id) \
                    from None
            return self.known[service_id]

    def forget(self, service_id: int) -> None:
        self.known.pop(service_id, None)


class _CallSecrets:
    """One call's secrets, read from the host's brokered Secrets service; closed with the call."""

    def __init__(self, broker: _Broker, service_id: int) -> None:
        self.broker = broker
        self.service_id = service_id
        self.channel: Optional[Channel] = None
        self.stub: Optional[SecretsStub] = None
        self.lock = asyncio.Lock()
        self.closed = False

    async def _connect(self) -> SecretsStub:
        async with self.lock:
            if self.stub is None:
                info = await self.broker.wait_for(self.service_id)
                if self.broker.client_ssl is None:
                    raise RuntimeError("no AutoMTLS identity to reach the host's secrets")
                config = Configuration(ssl_target_name_override="localhost")
                if info.network == "unix":
                    self.channel = Channel(path=info.address, ssl=self.broker.client_ssl,
                                           config=config)
                else:
                    host, _, port = info.address.rpartition(":")
                    self.channel = Channel(host=host, port=int(port), ssl=self.broker.client_ssl,
                                           config=config)
                self.stub = SecretsStub(self.channel)
            return self.stub

    async def secret(self, name: str) -> str:
        if self.closed:
            raise Permanent("secret `%s` is not available: secrets can be read only during the "
                            "call that received them" % name)
        stub = await self._connect()
        try:
            reply = await stub.Secret(pb.SecretRequest(name=name), timeout=10)
        except GRPCError as e:
            if e.status == Status.PERMISSION_DENIED:
                raise Permanent(e.message or "secret `%s` refused" % name) from None
            raise Permanent("secret `%s` is not available: %s (secrets can be read only during "
                            "a call)" % (name, e.message)) from None
        except (OSError, asyncio.TimeoutError) as e:
            raise RuntimeError("secrets are not available: %s" % (e or type(e).__name__)) \
                from None
        return reply.value

    def close(self) -> None:
        self.closed = True
        if self.channel is not None:
            self.channel.close()
        self.broker.forget(self.service_id)


# ------------------------------------------------------------------- health, controller, stdio


class _Health:
    """grpc.health.v1.Health: `plugin` and `""` are SERVING."""

    SERVING = health_pb2.HealthCheckResponse.SERVING

    def __init__(self, stop: _Stop) -> None:
        self.stop = stop

    def _status(self, service: str) -> Any:
        if service in ("", "plugin"):
            return health_pb2.HealthCheckResponse(status=self.SERVING)
        raise GRPCError(Status.NOT_FOUND, "unknown service %r" % service)

    async def Check(self, stream: Any) -> None:
        req = await stream.recv_message()
        await stream.send_message(self._status(req.service))

    async def Watch(self, stream: Any) -> None:
        req = await stream.recv_message()
        await stream.send_message(self._status(req.service))
        await self.stop.event.wait()

    def __mapping__(self) -> Dict[str, grpclib.const.Handler]:
        req, resp = health_pb2.HealthCheckRequest, health_pb2.HealthCheckResponse
        return {
            "/grpc.health.v1.Health/Check": grpclib.const.Handler(
                self.Check, grpclib.const.Cardinality.UNARY_UNARY, req, resp),
            "/grpc.health.v1.Health/Watch": grpclib.const.Handler(
                self.Watch, grpclib.const.Cardinality.UNARY_STREAM, req, resp),
        }


class _Controller(GRPCControllerBase):
    def __init__(self, stop: _Stop) -> None:
        self.stop = stop

    async def Shutdown(self, stream: Any) -> None:
        await stream.recv_message()
        # Answer first, then stop: the host waits for the process to exit.
        asyncio.get_running_loop().call_later(0.02, self.stop, 0)
        await stream.send_message(grpc_controller_pb2.Empty())


class _Stdio(GRPCStdioBase):
    """Stays open and silent: logs go to stderr, stdout carries nothing after the handshake."""

    def __init__(self, stop: _Stop) -> None:
        self.stop = stop

    async def StreamStdio(self, stream: Any) -> None:
        await stream.recv_message()
        await stream.send_initial_metadata()
        await self.stop.event.wait()


# ----------------------------------------------------------------------------------- deployer


def _grpc_message(e: BaseException) -> str:
    text = str(e)
    return text if text else type(e).__name__


class _Service(DeployerBase):
    """The Deployer service, backed by the factory's deployer."""

    def __init__(self, factory: Factory, broker: _Broker, log: logging.Logger) -> None:
        self.factory = factory
        self.broker = broker
        self.log = log
        self.deployer: Any = None
        self.caps: List[str] = []
        self.name = module_name()

    # -- plumbing

    def _configured(self) -> Any:
        if self.deployer is None:
            raise GRPCError(Status.FAILED_PRECONDITION, "Configure has not been called")
        return self.deployer

    def _optional(self, call: str) -> Any:
        """The deployer, when it implements the optional `call`; else UNIMPLEMENTED."""
        d = self._configured()
        cap, method = CALLS[call]
        if cap not in self.caps or not overrides(d, method):
            raise GRPCError(Status.UNIMPLEMENTED, "this plugin does not implement %s" % call)
        return d

    def _request(self, w: Any, with_secrets: bool = True) -> Request:
        secrets = None
        if with_secrets and w.secrets_broker_id:
            secrets = _CallSecrets(self.broker, w.secrets_broker_id)
        try:
            return Request(w, secrets)
        except ValueError as e:  # json.JSONDecodeError is one
            raise GRPCError(Status.INVALID_ARGUMENT, "params_json: %s" % e) from None

    async def _call(self, call: str, work: Callable[[], Awaitable[Any]]) -> Any:
        """Runs `work` with the SDK's error mapping: Permanent -> ABORTED, GRPCError as is,
        anything else -> UNKNOWN (logged with its traceback). Cancellation propagates."""
        try:
            return await work()
        except GRPCError:
            raise
        except NotImplementedCall:
            raise GRPCError(Status.UNIMPLEMENTED,
                            "this plugin does not implement %s" % call) from None
        except Permanent as e:
            raise GRPCError(Status.ABORTED, _grpc_message(e)) from None
        except Exception as e:  # noqa: BLE001 - every failure goes back to the host
            self.log.error("%s failed: %s", call, _grpc_message(e), exc_info=True)
            raise GRPCError(Status.UNKNOWN, _grpc_message(e)) from None

    async def _with_request(self, call: str, w: Any, fn: Callable[[Request], Awaitable[Any]],
                            with_secrets: bool = True) -> Any:
        # Every line logged during the call — the plugin's, and the SDK's own, a failure's
        # traceback included — names its deployment (and its target when it has one).
        tags = None
        if w.deployment_id:
            tags = {"deployment_id": w.deployment_id}
            if len(w.targets) == 1:
                t = w.targets[0]
                tags["target"] = t.moniker.split("::")[-1] if t.moniker else t.host
                tags["moniker"] = t.moniker
        token = CALL.set(tags)

        async def work() -> Any:
            req = self._request(w, with_secrets)
            started = time.monotonic()
            cancelled = True
            try:
                result = await fn(req)
                cancelled = False
                return result
            except asyncio.CancelledError:
                raise
            except BaseException:
                cancelled = False
                raise
            finally:
                if req._secrets is not None:  # pylint: disable=protected-access
                    req._secrets.close()  # pylint: disable=protected-access
                if tags and os.environ.get(CONFORMANCE_ENV) == "1":
                    self.log.debug(CALL_ENDED, extra={
                        "call": call, "idempotency_key": req.idempotency_key,
                        "ms": int((time.monotonic() - started) * 1000),
                        "cancelled": cancelled})
        try:
            return await self._call(call, work)
        finally:
            CALL.reset(token)

    def _conformance(self, w: Any) -> Optional[Dict[str, Any]]:
        """The conformance kit's request, when the kit started this plugin and asks."""
        if os.environ.get(CONFORMANCE_ENV) != "1" or not w.params_json:
            return None
        try:
            params = json.loads(w.params_json)
        except ValueError:
            return None
        if not isinstance(params, dict) or CONFORMANCE_KEY not in params:
            return None
        conf = params[CONFORMANCE_KEY]
        return conf if isinstance(conf, dict) else None

    def _result(self, r: Any) -> Any:
        if isinstance(r, Result):
            return r.to_wire(self.name)
        if isinstance(r, (list, tuple)) and all(isinstance(t, TargetResult) for t in r):
            return Result(targets=list(r)).to_wire(self.name)
        raise TypeError("a call must return manent_plugin.Result, not %s" % type(r).__name__)

    # -- calls

    async def Configure(self, stream: Any) -> None:
        w = await stream.recv_message()
        try:
            config = json.loads(w.config_json) if w.config_json else {}
        except ValueError as e:
            raise GRPCError(Status.INVALID_ARGUMENT, "config_json: %s" % e) from None
        if config is None:
            config = {}
        try:
            d = self.factory(config, self.log)
            if inspect.isawaitable(d):
                d = await d
        except GRPCError:
            raise
        except Exception as e:  # noqa: BLE001
            self.log.error("the plugin's factory failed: %s", _grpc_message(e), exc_info=True)
            raise GRPCError(Status.INVALID_ARGUMENT, _grpc_message(e)) from None
        self.deployer = d
        self.caps = capabilities(d)
        await stream.send_message(pb.ConfigureResponse(name=self.name, capabilities=self.caps))

    async def Supports(self, stream: Any) -> None:
        w = await stream.recv_message()
        d = self._configured()
        from .types import Artifact

        ok = await self._call("Supports", lambda: d.supports(Artifact.from_wire(w.artifact)))
        await stream.send_message(pb.SupportsResponse(supported=bool(ok)))

    async def Validate(self, stream: Any) -> None:
        w = await stream.recv_message()
        d = self._configured()
        conf = self._conformance(w)
        if conf is not None:
            if "refuse" in conf:
                raise GRPCError(Status.INVALID_ARGUMENT, "conformance: %s" % conf["refuse"])
            await stream.send_message(pb.Empty())
            return
        w.secrets_broker_id = 0
        await self._with_request("Validate", w, d.validate, with_secrets=False)
        await stream.send_message(pb.Empty())

    async def Deploy(self, stream: Any) -> None:
        w = await stream.recv_message()
        d = self._configured()
        conf = self._conformance(w)
        if conf is not None:
            resp = await self._with_request("Deploy", w, lambda r: self._conform(r, conf))
        else:
            resp = self._result(await self._with_request("Deploy", w, d.deploy))
        await stream.send_message(resp)

    async def _conform(self, req: Request, conf: Dict[str, Any]) -> Any:
        """The conformance protocol's Deploy: the SDK answers, the plugin is never called."""
        if "print" in conf:
            print(conf["print"])
        if conf.get("log"):
            for name, level in (("trace", TRACE), ("debug", logging.DEBUG),
                                ("info", logging.INFO), ("warn", logging.WARNING),
                                ("error", logging.ERROR)):
                self.log.log(level, "conformance level %s", name)
        if "secret" in conf:
            value = await req.secret(str(conf["secret"]))
            digest = hashlib.sha256(value.encode("utf-8")).hexdigest()
            self.log.info("conformance secret", extra={"sha256": digest})
        if "sleep_ms" in conf:
            try:
                await asyncio.sleep(float(conf["sleep_ms"]) / 1000.0)
            except asyncio.CancelledError:
                self.log.warning("conformance cancelled",
                                 extra={"idempotency_key": req.idempotency_key})
                raise  # grpclib ends the RPC as cancelled
        fail = conf.get("fail")
        if fail == "permanent":
            raise GRPCError(Status.ABORTED, "conformance: permanent failure")
        if fail == "retryable":
            raise GRPCError(Status.UNKNOWN, "conformance: retryable failure")
        return pb.DeployResponse(
            plugin=self.name, release=req.artifact.version,
            targets=[pb.TargetResult(host=t.host, status="unchanged", message="conformance")
                     for t in req.targets])

    async def _deploy_like(self, call: str, stream: Any, method: str) -> None:
        w = await stream.recv_message()
        d = self._optional(call)
        result = await self._with_request(call, w, getattr(d, method))
        await stream.send_message(self._result(result))

    async def _empty(self, call: str, stream: Any, method: str) -> None:
        w = await stream.recv_message()
        d = self._optional(call)
        await self._with_request(call, w, getattr(d, method))
        await stream.send_message(pb.Empty())

    async def DryRun(self, stream: Any) -> None:
        await self._deploy_like("DryRun", stream, "dry_run")

    async def DeployCandidate(self, stream: Any) -> None:
        await self._deploy_like("DeployCandidate", stream, "deploy_candidate")

    async def CurrentRelease(self, stream: Any) -> None:
        w = await stream.recv_message()
        d = self._optional("CurrentRelease")
        releases = await self._with_request("CurrentRelease", w, d.current_release)
        await stream.send_message(pb.CurrentReleaseResponse(targets=_releases(releases)))

    async def Rollback(self, stream: Any) -> None:
        w = await stream.recv_message()
        d = self._optional("Rollback")
        to = Release.from_wire(w.to)
        result = await self._with_request("Rollback", w.request, lambda r: d.rollback(r, to))
        await stream.send_message(self._result(result))

    async def PrepareSlots(self, stream: Any) -> None:
        w = await stream.recv_message()
        d = self._optional("PrepareSlots")
        state = await self._with_request("PrepareSlots", w, d.prepare_slots)
        await stream.send_message(pb.StateResponse(state_json=json.dumps(state).encode()))

    async def PromoteCandidate(self, stream: Any) -> None:
        await self._empty("PromoteCandidate", stream, "promote_candidate")

    async def RevertCandidate(self, stream: Any) -> None:
        await self._empty("RevertCandidate", stream, "revert_candidate")

    async def RetirePrevious(self, stream: Any) -> None:
        await self._empty("RetirePrevious", stream, "retire_previous")

    async def SetCandidateWeight(self, stream: Any) -> None:
        w = await stream.recv_message()
        d = self._optional("SetCandidateWeight")
        await self._with_request("SetCandidateWeight", w.request,
                                 lambda r: d.set_candidate_weight(r, w.weight))
        await stream.send_message(pb.Empty())

    async def CandidateWeight(self, stream: Any) -> None:
        w = await stream.recv_message()
        d = self._optional("CandidateWeight")
        weight = await self._with_request("CandidateWeight", w, d.candidate_weight)
        await stream.send_message(pb.WeightResponse(weight=int(weight)))

    async def RoutingState(self, stream: Any) -> None:
        w = await stream.recv_message()
        d = self._optional("RoutingState")
        state = await self._with_request("RoutingState", w, d.routing_state)
        if not isinstance(state, RoutingState):
            raise GRPCError(Status.UNKNOWN, "routing_state must return manent_plugin.RoutingState")
        await stream.send_message(pb.RoutingStateResponse(routing=state.routing.to_wire(),
                                                          foreign=state.foreign))

    async def Traffic(self, stream: Any) -> None:
        w = await stream.recv_message()
        d = self._optional("Traffic")
        if not w.HasField("request"):
            raise GRPCError(Status.INVALID_ARGUMENT, "Traffic without its request")
        resp = await self._with_request("Traffic", w.request, lambda r: d.traffic(r, w.window_ms, w.since_ms))
        if isinstance(resp, dict):
            from google.protobuf import json_format

            resp = json_format.ParseDict(resp, pb.TrafficResponse())
        await stream.send_message(resp)

    async def RouteTesters(self, stream: Any) -> None:
        w = await stream.recv_message()
        d = self._optional("RouteTesters")
        details = await self._with_request("RouteTesters", w, d.route_testers)
        await stream.send_message(pb.DetailsResponse(
            details={str(k): str(v) for k, v in dict(details or {}).items()}))

    async def ScaleCandidate(self, stream: Any) -> None:
        w = await stream.recv_message()
        d = self._optional("ScaleCandidate")
        await self._with_request("ScaleCandidate", w.request,
                                 lambda r: d.scale_candidate(r, w.weight))
        await stream.send_message(pb.Empty())


def _releases(releases: Iterable[Any]) -> List[Any]:
    out = []
    if isinstance(releases, dict):
        releases = [TargetRelease(host=h, version=v or "") for h, v in releases.items()]
    for r in releases or []:
        if isinstance(r, TargetRelease):
            out.append(pb.TargetRelease(host=r.host, version=r.version or ""))
        else:
            host, version = r
            out.append(pb.TargetRelease(host=host, version=version or ""))
    return out


# -------------------------------------------------------------------------------------- serve


def _traced() -> bool:
    """True while a debugger (a tracer: gdb, or debugpy's attach through it) is attached."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("TracerPid:"):
                    return line.split(":", 1)[1].strip() != "0"
    except OSError:
        pass
    return False


def _wait_for_debugger(log: logging.Logger) -> None:
    """Started for a debugger (MANENT_PLUGIN_WAIT_FOR_DEBUGGER=1: manent's MANENT_PLUGIN_DEBUG
    names this plugin), waits until one is attached before anything else."""
    if os.environ.get("MANENT_PLUGIN_WAIT_FOR_DEBUGGER") != "1":
        return
    # Any process of this user may attach, not only an ancestor (Ubuntu's default
    # kernel.yama.ptrace_scope=1 refuses `gdb -p` from another terminal otherwise).
    try:
        import ctypes  # pylint: disable=import-outside-toplevel
        ctypes.CDLL(None).prctl(0x59616d61, ctypes.c_ulong(-1 & 0xFFFFFFFFFFFFFFFF), 0, 0, 0)
    except (OSError, AttributeError):
        pass
    log.warning("waiting for a debugger to attach", extra={"pid": os.getpid()})
    # gdb stays attached (a tracer); debugpy attaches through gdb, detaches, and is then loaded.
    while not (_traced() or "debugpy" in sys.modules or "pydevd" in sys.modules):
        time.sleep(0.1)
    log.info("a debugger is attached: serving")


def serve(factory: Factory, versions: Sequence[int] = (APP_PROTOCOL_VERSION,)) -> None:
    """Serves the plugin `factory(config, log)` builds until manent shuts it down, then exits.

    A plugin's whole `main` is `manent_plugin.serve(factory)`. Never returns.
    """
    if os.environ.get(MAGIC_COOKIE_KEY) != MAGIC_COOKIE_VALUE:
        sys.stderr.write(
            "This program is a manent plugin. It is not meant to be run by hand: declare it "
            "under `plugins:` in manent.yml and manent starts it when a deploy needs it.\n")
        sys.stderr.flush()
        os._exit(1)  # pylint: disable=protected-access
    log = logger()
    _wait_for_debugger(log)
    try:
        code = asyncio.run(_run(factory, versions, log))
    except Exception as e:  # noqa: BLE001
        log.error("plugin failed: %s", _grpc_message(e), exc_info=True)
        code = 1
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except Exception:  # noqa: BLE001
            pass
    os._exit(code)  # pylint: disable=protected-access


async def _run(factory: Factory, versions: Sequence[int], log: logging.Logger) -> int:
    version = negotiate(os.environ.get("PLUGIN_PROTOCOL_VERSIONS"), versions)
    sockdir = os.environ.get("PLUGIN_UNIX_SOCKET_DIR") or tempfile.gettempdir()
    path = os.path.join(sockdir, "manent-plugin-%d-%s.sock" % (os.getpid(),
                                                               _secrets.token_hex(4)))
    stop = _Stop()
    broker = _Broker(stop)
    host_pem = os.environ.get("PLUGIN_CLIENT_CERT", "").strip()
    server_ssl = None
    cert = ""
    if host_pem:
        identity = tls.generate()
        try:
            server_ssl, broker.client_ssl = tls.contexts(identity, host_pem + "\n")
        except Exception as e:  # noqa: BLE001
            raise RuntimeError("PLUGIN_CLIENT_CERT is not a usable certificate: %s" % e) from None
        cert = identity.handshake_field()
    server = Server([_Health(stop), _Controller(stop), _Stdio(stop), broker,
                     _Service(factory, broker, log)])
    await server.start(path=path, ssl=server_ssl)
    try:
        # Stdout is the handshake channel: this one line, then never again.
        sys.stdout.write("%d|%d|unix|%s|grpc|%s\n" % (CORE_PROTOCOL_VERSION, version, path, cert))
        sys.stdout.flush()
        os.dup2(2, 1)
        try:
            sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
        except (AttributeError, ValueError):
            pass
        loop = asyncio.get_running_loop()
        _on_sigterm(loop, stop)
        # go-plugin ignores interrupts: the host stops its plugins itself. A handler, not
        # SIG_IGN: an ignored signal would stay ignored in every command the plugin runs.
        loop.add_signal_handler(signal.SIGINT, lambda: None)
        watch = asyncio.ensure_future(_watch_parent(stop, log))
        await stop.event.wait()
        watch.cancel()
        # Whatever still runs (a thread in an executor, a handler that swallowed its
        # cancellation) gets two seconds; then the process ends, as the Rust and Go SDKs do.
        stop.deadline(stop.code)
        server.close()
        try:
            await asyncio.wait_for(server.wait_closed(), 0.5)
        except (asyncio.TimeoutError, Exception):  # noqa: BLE001
            pass
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass
    return stop.code


def _on_sigterm(loop: asyncio.AbstractEventLoop, stop: _Stop) -> None:
    """SIGTERM ends the plugin even while a coroutine blocks the event loop: asyncio's own
    handler would wait for the loop, a Python handler runs on the main thread between two
    bytecodes. It only writes a byte: a watchdog thread, started here and not in the handler
    (a thread started inside a handler can deadlock on the lock the interrupted code holds),
    ends the process after the stop's grace; the loop stops as soon as it runs."""
    me = os.getpid()
    wake_r, wake_w = os.pipe()
    os.set_inheritable(wake_r, False)
    os.set_inheritable(wake_w, False)

    def watchdog() -> None:
        try:
            os.read(wake_r, 1)
        except OSError:
            return
        time.sleep(EXIT_WITHIN + 0.5)
        os._exit(0)  # pylint: disable=protected-access

    threading.Thread(target=watchdog, name="manent-sigterm", daemon=True).start()

    def terminated(signum: int, _frame: Any) -> None:
        if os.getpid() != me:
            # A child forked without exec (multiprocessing): SIGTERM ends it, as by default.
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        try:
            os.write(wake_w, b"x")
        except OSError:
            pass
        try:
            loop.call_soon_threadsafe(stop, 0)
        except RuntimeError:
            pass  # the loop is closed: the watchdog ends the process

    signal.signal(signal.SIGTERM, terminated)


async def _watch_parent(stop: _Stop, log: logging.Logger) -> None:
    """A host killed outright never says Shutdown: when the parent changes, stop (exit 1)."""
    parent = os.getppid()
    while True:
        await asyncio.sleep(1.0)
        if os.getppid() != parent:
            log.warning("the host is gone: stopping")
            stop(1)
            return
