"""manent-plugin: write manent deploy plugins in Python.

    import manent_plugin as mp

    class Hello(mp.Deployer):
        async def validate(self, req): ...
        async def deploy(self, req):
            return mp.Result(release=req.artifact.version,
                             targets=[mp.TargetResult(t.host, mp.TargetResult.DEPLOYED)
                                      for t in req.targets])

    mp.serve(lambda config, log: Hello())
"""

from ._proto import deployer_pb2 as pb
from .deployer import Deployer, capabilities
from .errors import Permanent
from .log import CALL_ENDED, TRACE, HclogFormatter, TargetLog, logger
from .server import negotiate, serve
from .types import (Artifact, Pool, Release, Request, Result, Routing, RoutingState, Target,
                    TargetRelease, TargetResult)

__version__ = "0.1.0"

__all__ = [
    "Artifact", "CALL_ENDED", "Deployer", "HclogFormatter", "Permanent", "Pool", "Release", "Request",
    "Result", "Routing", "RoutingState", "TRACE", "Target", "TargetLog", "TargetRelease", "TargetResult",
    "capabilities", "logger", "negotiate", "pb", "serve",
]
