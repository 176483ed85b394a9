package main

// What manent-plugin-{{name}} does. Each call says "not implemented" until you write it: a
// plugin.Permanent error fails the step at once (a retry cannot help); any other error is
// retried. Optional calls (DryRun, CurrentRelease, Rollback, canary slots and routing) are
// offered by implementing their interface from manent.dev/sdk/go/plugin.

import (
	"context"
	"encoding/json"
	"errors"

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

// Validate checks a request before any target is touched (no secrets, 30 s at most).
func (d *deployer) Validate(ctx context.Context, req *plugin.Request) error {
	d.log.Debug("validate", "application", req.Application)
	return plugin.Permanent(errors.New("{{name}}: validate is not implemented yet"))
}

// Deploy deploys req.Artifact to req.Targets; the same req.IdempotencyKey may come again after
// a crash, and must then find the work done.
func (d *deployer) Deploy(ctx context.Context, req *plugin.Request) (*plugin.Result, error) {
	d.log.Info("deploy", "targets", len(req.Targets))
	return nil, plugin.Permanent(errors.New("{{name}}: deploy is not implemented yet"))
}
