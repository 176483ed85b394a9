"""Error mapping, capability detection and the conformance protocol, on the service object."""

import asyncio
import json
import logging
import os
import unittest
from unittest import mock

from grpclib.const import Status
from grpclib.exceptions import GRPCError

import manent_plugin as mp
from manent_plugin.server import _Broker, _Service, _Stop, negotiate


class Minimal(mp.Deployer):
    async def validate(self, req):
        return None

    async def deploy(self, req):
        return mp.Result(release=req.artifact.version)


class Full(Minimal):
    parallel_targets = True

    async def dry_run(self, req): ...
    async def current_release(self, req): ...
    async def rollback(self, req, to): ...
    async def prepare_slots(self, req): ...
    async def deploy_candidate(self, req): ...
    async def promote_candidate(self, req): ...
    async def revert_candidate(self, req): ...
    async def retire_previous(self, req): ...
    async def set_candidate_weight(self, req, weight): ...
    async def candidate_weight(self, req): ...
    async def route_testers(self, req): ...
    async def scale_candidate(self, req, percent): ...


class OnlyOneRouterHalf(Minimal):
    async def set_candidate_weight(self, req, weight): ...


class TwoOfFiveSlotCalls(Minimal):
    async def prepare_slots(self, req): ...
    async def deploy_candidate(self, req): ...


class CapabilitiesTest(unittest.TestCase):
    def test_none_for_a_minimal_plugin(self):
        self.assertEqual(mp.capabilities(Minimal()), [])

    def test_every_overridden_optional_method_is_announced(self):
        self.assertEqual(mp.capabilities(Full()), [
            "current_release", "dry_run", "parallel_targets", "rollback", "scale", "slots",
            "testers", "traffic_router"])

    def test_a_router_needs_both_weight_calls(self):
        self.assertEqual(mp.capabilities(OnlyOneRouterHalf()), [])

    def test_slots_need_all_five_calls(self):
        # A canary that could deploy a candidate but not promote or revert it must not start.
        self.assertEqual(mp.capabilities(TwoOfFiveSlotCalls()), [])

    def test_parallel_targets_is_an_attribute(self):
        d = Minimal()
        d.parallel_targets = True
        self.assertEqual(mp.capabilities(d), ["parallel_targets"])


class NegotiateTest(unittest.TestCase):
    def test_highest_common_else_lowest_own(self):
        self.assertEqual(negotiate("3,1,2", [1, 2]), 2)
        self.assertEqual(negotiate("5", [1, 2]), 1)
        self.assertEqual(negotiate(None, [1]), 1)
        self.assertEqual(negotiate("x, 1", [1]), 1)


class FakeStream:
    def __init__(self, msg):
        self.msg = msg
        self.sent = []

    async def recv_message(self):
        return self.msg

    async def send_message(self, m):
        self.sent.append(m)


def service(factory=lambda c, log: Minimal()):
    log = logging.getLogger("manent_plugin.tests.quiet")
    log.addHandler(logging.NullHandler())
    log.propagate = False
    return _Service(factory, _Broker(_Stop()), log)


def run(coro):
    return asyncio.run(coro)


def deploy_request(params=None, **kw):
    return mp.pb.DeployRequest(
        deployment_id="dep-1", idempotency_key="dep-1/9", attempt=1,
        artifact=mp.pb.Artifact(version="7"),
        targets=[mp.pb.Target(host="h1", moniker="prod::a::p::t1")],
        params_json=json.dumps(params or {}).encode(), **kw)


class ErrorMappingTest(unittest.TestCase):
    def status_of(self, exc):
        async def go():
            with self.assertRaises(GRPCError) as e:
                await service()._call("Deploy", self._raiser(exc))
            return e.exception
        return run(go())

    @staticmethod
    def _raiser(exc):
        async def f():
            raise exc
        return f

    def test_permanent_is_aborted(self):
        e = self.status_of(mp.Permanent("no such package"))
        self.assertEqual((e.status, e.message), (Status.ABORTED, "no such package"))

    def test_other_exceptions_are_unknown_with_their_message(self):
        e = self.status_of(RuntimeError("ssh: connection refused"))
        self.assertEqual((e.status, e.message), (Status.UNKNOWN, "ssh: connection refused"))

    def test_grpc_errors_pass_through(self):
        e = self.status_of(GRPCError(Status.INVALID_ARGUMENT, "bad"))
        self.assertEqual((e.status, e.message), (Status.INVALID_ARGUMENT, "bad"))

    def test_cancellation_propagates(self):
        async def go():
            with self.assertRaises(asyncio.CancelledError):
                await service()._call("Deploy", self._raiser(asyncio.CancelledError()))
        run(go())

    def test_calls_before_configure_are_refused(self):
        async def go():
            with self.assertRaises(GRPCError) as e:
                await service().Deploy(FakeStream(deploy_request()))
            return e.exception
        self.assertEqual(run(go()).status, Status.FAILED_PRECONDITION)

    def test_unannounced_optional_calls_are_unimplemented(self):
        async def go():
            s = service()
            await s.Configure(FakeStream(mp.pb.ConfigureRequest(config_json=b"{}")))
            with self.assertRaises(GRPCError) as e:
                await s.DryRun(FakeStream(deploy_request()))
            return e.exception
        self.assertEqual(run(go()).status, Status.UNIMPLEMENTED)

    def test_configure_answers_capabilities_and_deploy_maps_the_result(self):
        async def go():
            s = service(lambda c, log: Full())
            st = FakeStream(mp.pb.ConfigureRequest(config_json=b'{"a": 1}'))
            await s.Configure(st)
            d = FakeStream(deploy_request())
            await s.Deploy(d)
            return st.sent[0], d.sent[0]
        conf, resp = run(go())
        self.assertIn("traffic_router", conf.capabilities)
        self.assertEqual(resp.release, "7")

    def test_a_secret_without_a_broker_id_is_permanent(self):
        req = mp.Request(deploy_request())
        with self.assertRaises(mp.Permanent):
            run(req.secret("token"))


class ConformanceTest(unittest.TestCase):
    class Refuses(Minimal):
        async def deploy(self, req):
            raise AssertionError("the plugin must not be called")

    def call(self, params, method="Deploy"):
        async def go():
            s = service(lambda c, log: self.Refuses())
            await s.Configure(FakeStream(mp.pb.ConfigureRequest()))
            st = FakeStream(deploy_request({"manent_conformance": params}))
            await getattr(s, method)(st)
            return st.sent
        return run(go())

    def test_without_the_variable_the_plugin_is_called(self):
        with mock.patch.dict(os.environ, {"MANENT_PLUGIN_CONFORMANCE": ""}):
            with self.assertRaises(GRPCError) as e:
                self.call({})
        self.assertEqual(e.exception.status, Status.UNKNOWN)

    def test_the_sdk_answers_deploy_itself(self):
        with mock.patch.dict(os.environ, {"MANENT_PLUGIN_CONFORMANCE": "1"}):
            (resp,) = self.call({})
        self.assertEqual(resp.release, "7")
        self.assertEqual([(t.host, t.status, t.message) for t in resp.targets],
                         [("h1", "unchanged", "conformance")])

    def test_failures_and_refusals(self):
        with mock.patch.dict(os.environ, {"MANENT_PLUGIN_CONFORMANCE": "1"}):
            for params, method, status, message in [
                ({"fail": "permanent"}, "Deploy", Status.ABORTED, "conformance: permanent failure"),
                ({"fail": "retryable"}, "Deploy", Status.UNKNOWN, "conformance: retryable failure"),
                ({"refuse": "WHY"}, "Validate", Status.INVALID_ARGUMENT, "conformance: WHY"),
            ]:
                with self.assertRaises(GRPCError) as e:
                    self.call(params, method)
                self.assertEqual((e.exception.status, e.exception.message), (status, message))
            self.assertEqual(len(self.call({"fail": "x"}, "Validate")), 1)

    def test_a_secret_without_secrets_is_aborted(self):
        with mock.patch.dict(os.environ, {"MANENT_PLUGIN_CONFORMANCE": "1"}):
            with self.assertRaises(GRPCError) as e:
                self.call({"secret": "token"})
        self.assertEqual(e.exception.status, Status.ABORTED)


if __name__ == "__main__":
    unittest.main()
