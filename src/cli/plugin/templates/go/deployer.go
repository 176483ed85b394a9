package main

// What manent-plugin-{{name}} does. Each call says "not implemented" until you write it: a
// plugin.Permanent error fails the step at once (a retry cannot help); any other error is
// retried. Optional calls (DryRun, CurrentRelease, Rollback, canary slots and routing) are
// offered by implementing their interface from manent.dev/sdk/go/plugin.

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	hclog "github.com/hashicorp/go-hclog"

	"manent.dev/sdk/go/plugin"
)

type deployer struct {
	log hclog.Logger
}

// factory is called at every start with the plugin's options from manent.yml and the logger
// manent shows in its log pane (hclog JSON on stderr).
func factory(options json.RawMessage, log hclog.Logger) (plugin.Deployer, error) {
	return &deployer{log: log}, nil
}

// params is what a descriptor's deploy.params may hold.
type params struct {
	// DelayMs waits before the work: what the kit file's `slow:` sets to check that a cancelled
	// Deploy stops.
	DelayMs int `json:"delay_ms"`
}

// Validate checks a request before any target is touched (no secrets, 30 s at most). Log
// through req.Log(): its lines name the deployment, so `manent logs` shows them.
func (d *deployer) Validate(ctx context.Context, req *plugin.Request) error {
	var p params
	if err := req.DecodeParams(&p); err != nil {
		return plugin.Permanent(err)
	}
	req.Log().Debug("validate", "application", req.Application)
	return nil
}

// Deploy deploys req.Artifact to req.Targets; the same req.IdempotencyKey may come again after
// a crash, and must then find the work done (answer plugin.StatusUnchanged).
func (d *deployer) Deploy(ctx context.Context, req *plugin.Request) (*plugin.Result, error) {
	var p params
	if err := req.DecodeParams(&p); err != nil {
		return nil, plugin.Permanent(err)
	}
	req.Log().Info("deploy", "targets", len(req.Targets))
	// Wait without ignoring cancellation: a cancelled call must stop.
	select {
	case <-time.After(time.Duration(p.DelayMs) * time.Millisecond):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return nil, plugin.Permanent(errors.New("{{name}}: deploy is not implemented yet"))
}
