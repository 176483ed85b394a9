"""manent-plugin-{{name}}: a manent plugin.

`manent plugin test ./manent-plugin-{{name}}` checks it against the contract.
Each call says "not implemented" until you write it: raising Permanent fails the step at once
(a retry cannot help); any other exception is retried. Optional calls (dry_run,
current_release, rollback, canary slots and routing) are offered by overriding their method.
"""

import asyncio

from manent_plugin import Deployer, Permanent, serve


class {{type}}(Deployer):
    def __init__(self, options, log):
        self.options = options
        self.log = log

    async def validate(self, req):
        """Checks a request before any target is touched (no secrets, 30 s at most)."""
        if not isinstance(req.params.get("delay_ms", 0), int):
            raise Permanent("params.delay_ms: a number of milliseconds")
        self.log.debug("validate %s", req.application)

    async def deploy(self, req):
        """Deploys req.artifact to req.targets; the same req.idempotency_key may come again
        after a crash, and must then find the work done (answer TargetResult.UNCHANGED).
        Lines logged during a call name its deployment, so `manent logs` shows them."""
        self.log.info("deploy to %d targets", len(req.targets))
        # `delay_ms` (the kit file's `slow:`) waits before the work; a cancelled call gets
        # asyncio.CancelledError here: let it through.
        await asyncio.sleep(req.params.get("delay_ms", 0) / 1000)
        raise Permanent("{{name}}: deploy is not implemented yet")


def factory(options, log):
    """Called at every start with the plugin's options from manent.yml and the logger manent
    shows in its log pane (hclog JSON on stderr)."""
    return {{type}}(options, log)


if __name__ == "__main__":
    serve(factory)
