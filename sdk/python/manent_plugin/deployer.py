"""The `Deployer` base class. A plugin overrides `validate` and `deploy`; every optional method
it overrides is a capability Configure announces (`capabilities(d)`)."""

from typing import Dict, List, Set

from .types import Artifact, Release, Request, Result, RoutingState, TargetRelease


class NotImplementedCall(Exception):
    """Raised by the base class's optional methods: the call is answered UNIMPLEMENTED."""


class Deployer:
    """Subclass it; `serve(factory)` calls the methods from manent's requests.

    Required: `validate`, `deploy`. Optional (each is a capability when overridden):
    `dry_run` (dry_run), `current_release` (current_release), `rollback` (rollback),
    `prepare_slots`/`deploy_candidate`/`promote_candidate`/`revert_candidate`/`retire_previous`
    (slots), `set_candidate_weight`+`candidate_weight` (+`routing_state`, `traffic`)
    (traffic_router), `route_testers` (testers), `scale_candidate` (scale), and the attribute
    `parallel_targets = True` (parallel_targets: requests may then carry parallelism > 1).
    """

    #: True when the plugin works on several targets of one request at once.
    parallel_targets = False

    async def supports(self, artifact: Artifact) -> bool:
        """Whether this plugin can deploy `artifact` (asked by the selection policy)."""
        return True

    async def validate(self, req: Request) -> None:
        """Checks a request before anything is touched (no secrets; 30 s at most). Raise to
        refuse: the deploy fails before any target is touched."""
        raise NotImplementedCall("Validate")

    async def deploy(self, req: Request) -> Result:
        """Deploys `req.artifact` to `req.targets`."""
        raise NotImplementedCall("Deploy")

    async def dry_run(self, req: Request) -> Result:
        """What `deploy` would do, changing nothing."""
        raise NotImplementedCall("DryRun")

    async def current_release(self, req: Request) -> List[TargetRelease]:
        """The live release per target, in request order."""
        raise NotImplementedCall("CurrentRelease")

    async def rollback(self, req: Request, to: Release) -> Result:
        """Makes `to` live again on the request's targets."""
        raise NotImplementedCall("Rollback")

    async def prepare_slots(self, req: Request) -> object:
        """Prepares stable and candidate slots; the JSON value returned comes back in every
        later call as `req.traffic`."""
        raise NotImplementedCall("PrepareSlots")

    async def deploy_candidate(self, req: Request) -> Result:
        raise NotImplementedCall("DeployCandidate")

    async def promote_candidate(self, req: Request) -> None:
        raise NotImplementedCall("PromoteCandidate")

    async def revert_candidate(self, req: Request) -> None:
        raise NotImplementedCall("RevertCandidate")

    async def retire_previous(self, req: Request) -> None:
        raise NotImplementedCall("RetirePrevious")

    async def set_candidate_weight(self, req: Request, weight: int) -> None:
        raise NotImplementedCall("SetCandidateWeight")

    async def candidate_weight(self, req: Request) -> int:
        raise NotImplementedCall("CandidateWeight")

    async def routing_state(self, req: Request) -> RoutingState:
        """What the running router serves, read back from the router itself."""
        raise NotImplementedCall("RoutingState")

    async def traffic(self, req: Request, window_ms: int, since_ms: int = 0) -> object:
        """The traffic the router observed over the last `window_ms`, never from before
        `since_ms` (epoch ms; 0 when not known), when the candidate release began serving on
        its slot: what the slot served earlier was another release's. A
        `manent_plugin.pb.TrafficResponse`; set `no_latency` on a slot when the router
        measures no latency (its p50/p95/p99 are then not figures)."""
        raise NotImplementedCall("Traffic")

    async def route_testers(self, req: Request) -> Dict[str, str]:
        raise NotImplementedCall("RouteTesters")

    async def scale_candidate(self, req: Request, percent: int) -> None:
        raise NotImplementedCall("ScaleCandidate")


def overrides(d: object, method: str) -> bool:
    """True when `d`'s class defines `method` itself rather than inheriting Deployer's."""
    mine = getattr(type(d), method, None)
    return mine is not None and mine is not getattr(Deployer, method, None)


# capability -> the methods that make it (all of them must be overridden)
CAPABILITIES = {
    "dry_run": ("dry_run",),
    "current_release": ("current_release",),
    "rollback": ("rollback",),
    "slots": ("prepare_slots", "deploy_candidate", "promote_candidate", "revert_candidate",
              "retire_previous"),
    "traffic_router": ("set_candidate_weight", "candidate_weight"),
    "testers": ("route_testers",),
    "scale": ("scale_candidate",),
}

# RPC -> (capability it needs or None, the method)
CALLS = {
    "DryRun": ("dry_run", "dry_run"),
    "CurrentRelease": ("current_release", "current_release"),
    "Rollback": ("rollback", "rollback"),
    "PrepareSlots": ("slots", "prepare_slots"),
    "DeployCandidate": ("slots", "deploy_candidate"),
    "PromoteCandidate": ("slots", "promote_candidate"),
    "RevertCandidate": ("slots", "revert_candidate"),
    "RetirePrevious": ("slots", "retire_previous"),
    "SetCandidateWeight": ("traffic_router", "set_candidate_weight"),
    "CandidateWeight": ("traffic_router", "candidate_weight"),
    "RoutingState": ("traffic_router", "routing_state"),
    "Traffic": ("traffic_router", "traffic"),
    "RouteTesters": ("testers", "route_testers"),
    "ScaleCandidate": ("scale", "scale_candidate"),
}


def capabilities(d: object) -> List[str]:
    """The capabilities Configure announces for `d`, sorted."""
    found: Set[str] = {c for c, methods in CAPABILITIES.items()
                       if all(overrides(d, m) for m in methods)}
    if getattr(d, "parallel_targets", False) is True:
        found.add("parallel_targets")
    return sorted(found)
