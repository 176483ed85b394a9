#!/usr/bin/env python3
"""script_deployer: a manent plugin that runs a shell command per target.

manent.yml:

    plugins:
      script:
        external:
          command: /opt/manent-plugins/script_deployer   # a launcher: see the SDK's README
        state: /var/lib/manent/script-state.json        # options: the factory's `config`

apps/web.yml:

    deploy:
      plugin: script
      params: {command: "rsync -a build/$VERSION/ $HOST:/srv/web/"}

The command runs with `sh -c` and MANENT_VERSION/VERSION, MANENT_HOST/HOST, MANENT_TARGET,
MANENT_DEPLOYMENT and MANENT_ARTIFACT_URI in its environment. A non-zero exit fails the target
(retried); exit code 78 (EX_CONFIG) fails it for good. DryRun prints what would run;
CurrentRelease reads the state file this plugin writes after each successful target.
"""

import asyncio
import json
import os
import signal
import time

import manent_plugin as mp

EX_CONFIG = 78


class ScriptDeployer(mp.Deployer):
    def __init__(self, config, log):
        self.log = log
        self.state_file = config.get("state") or os.path.expanduser(
            "~/.manent-script-deployer.json")

    # -- helpers

    def _command(self, req):
        command = req.params.get("command")
        if not isinstance(command, str) or not command.strip():
            raise mp.Permanent("params.command must be a non-empty string")
        return command

    def _env(self, req, target):
        env = dict(os.environ)
        env.update({
            "MANENT_VERSION": req.artifact.version, "VERSION": req.artifact.version,
            "MANENT_ARTIFACT_URI": req.artifact.uri,
            "MANENT_HOST": target.host, "HOST": target.host,
            "MANENT_TARGET": target.name, "MANENT_DEPLOYMENT": req.deployment_id,
        })
        return env

    def _read_state(self):
        try:
            with open(self.state_file, encoding="utf-8") as f:
                return json.load(f)
        except FileNotFoundError:
            return {}

    def _record(self, host, version, key):
        state = self._read_state()
        state[host] = version
        # The step whose work this was: the same key again (a retry after a crash) finds it.
        state.setdefault("_done", {})[host] = key
        tmp = self.state_file + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(state, f, indent=1, sort_keys=True)
        os.replace(tmp, self.state_file)

    async def _run(self, req, target):
        started = time.monotonic()
        # Its own process group: cancelling the call stops `sh` and whatever it started.
        proc = await asyncio.create_subprocess_exec(
            "sh", "-c", self._command(req), env=self._env(req, target),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            start_new_session=True, limit=1 << 20)
        try:
            while True:
                line = await proc.stdout.readline()
                if not line:
                    break
                self.log.info(line.decode(errors="replace").rstrip(),
                              extra={"target": target.name})
            code = await proc.wait()
        except BaseException:
            # Cancelled (manent cancelled the call, or its deadline passed) or failed on the
            # way: the command, and whatever it started, must not run on while the step is
            # retried. The whole group, even once `sh` has exited (a job it started may still
            # hold its output).
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            if proc.returncode is None:
                await proc.wait()
            raise
        ms = int((time.monotonic() - started) * 1000)
        if code == EX_CONFIG:
            raise mp.Permanent("%s: the command refused (exit %d)" % (target.name, code))
        if code != 0:
            raise RuntimeError("%s: the command exited with %d" % (target.name, code))
        return ms

    # -- the contract

    async def validate(self, req):
        self._command(req)

    async def deploy(self, req):
        results = []
        done = self._read_state().get("_done", {})
        for t in req.targets:
            if done.get(t.host) == req.idempotency_key:
                results.append(mp.TargetResult(t.host, mp.TargetResult.UNCHANGED,
                                               "done already under this step's key"))
                continue
            self.log.debug("running the command", extra={"target": t.name})
            ms = await self._run(req, t)
            self._record(t.host, req.artifact.version, req.idempotency_key)
            results.append(mp.TargetResult(t.host, mp.TargetResult.DEPLOYED,
                                           "command done", duration_ms=ms))
        return mp.Result(release=req.artifact.version, targets=results)

    async def dry_run(self, req):
        command = self._command(req)
        return mp.Result(release=req.artifact.version, targets=[
            mp.TargetResult(t.host, mp.TargetResult.UNCHANGED,
                            "would run `%s` with VERSION=%s HOST=%s"
                            % (command, req.artifact.version, t.host))
            for t in req.targets])

    async def current_release(self, req):
        state = self._read_state()
        return [mp.TargetRelease(t.host, state.get(t.host, "")) for t in req.targets]


if __name__ == "__main__":
    mp.serve(ScriptDeployer)
