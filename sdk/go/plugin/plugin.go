// Package plugin is the manent plugin contract as Go types: a Deployer and the optional
// interfaces that become the capabilities Configure announces. It hides the protobuf wire;
// package manent.dev/sdk/go/external serves a Factory over go-plugin's gRPC protocol.
package plugin

import (
	"context"
	"encoding/json"

	hclog "github.com/hashicorp/go-hclog"
)

// Factory builds the plugin from its options in manent.yml (JSON; "{}" when none) and the
// logger whose lines manent keeps with their levels and attributes. An error fails Configure.
type Factory func(config json.RawMessage, log hclog.Logger) (Deployer, error)

// Deployer is what every plugin implements. The ctx of each call is the RPC's: it is done when
// manent cancels the call (an operator, a step timeout) or the host goes away.
type Deployer interface {
	// Validate checks a request before any target is touched; an error fails the deploy
	// permanently. Called without secrets, within 30 seconds.
	Validate(ctx context.Context, req *Request) error
	// Deploy deploys req.Artifact to req.Targets.
	Deploy(ctx context.Context, req *Request) (*Result, error)
}

// Supporter tells whether the plugin can deploy an artifact (the selection policy asks).
// Plugins without it support every artifact.
type Supporter interface {
	Supports(ctx context.Context, artifact *Artifact) (bool, error)
}

// DryRunner plans without changing anything (capability dry_run).
type DryRunner interface {
	DryRun(ctx context.Context, req *Request) (*Result, error)
}

// ReleaseInspector tells what is live on each target, in request order (capability
// current_release). An empty Version means the plugin cannot tell.
type ReleaseInspector interface {
	CurrentRelease(ctx context.Context, req *Request) ([]TargetRelease, error)
}

// Rollbacker makes an earlier release live again (capability rollback). manent rolls back
// through plugins that have both rollback and current_release.
type Rollbacker interface {
	Rollback(ctx context.Context, req *Request, to Release) (*Result, error)
}

// SlotDeployer keeps a stable and a candidate slot for percentage rollouts (capability slots).
type SlotDeployer interface {
	// PrepareSlots returns state (JSON) that travels in every later call as Request.Traffic.
	PrepareSlots(ctx context.Context, req *Request) (json.RawMessage, error)
	DeployCandidate(ctx context.Context, req *Request) (*Result, error)
	PromoteCandidate(ctx context.Context, req *Request) error
	RevertCandidate(ctx context.Context, req *Request) error
	RetirePrevious(ctx context.Context, req *Request) error
}

// TrafficRouter splits traffic between stable and candidate (capability traffic_router).
type TrafficRouter interface {
	// SetCandidateWeight sends weight percent of production traffic to the candidate.
	SetCandidateWeight(ctx context.Context, req *Request, weight uint32) error
	// CandidateWeight is the weight the running router serves.
	CandidateWeight(ctx context.Context, req *Request) (uint32, error)
}

// RoutingStater is an optional addition to a TrafficRouter: what the running router serves,
// read back from the router itself. Without it manent falls back to CandidateWeight.
type RoutingStater interface {
	RoutingState(ctx context.Context, req *Request) (*RoutingState, error)
}

// TrafficReporter is an optional addition to a TrafficRouter: the traffic the router observed
// per slot over the window, for a canary's router analysis. The window never starts before
// window.Since, when the candidate release began serving on its slot: what the slot served
// earlier was another release's.
type TrafficReporter interface {
	Traffic(ctx context.Context, req *Request, window TrafficWindow) (*Traffic, error)
}

// TesterRouter routes testers (by header or cookie) to the candidate (capability testers) and
// returns how, e.g. the header to send.
type TesterRouter interface {
	RouteTesters(ctx context.Context, req *Request) (map[string]string, error)
}

// SlotScaler scales the candidate to percent of the stable capacity (capability scale).
type SlotScaler interface {
	ScaleCandidate(ctx context.Context, req *Request, percent uint32) error
}

// ParallelDeployer declares that the targets of one request may be worked on at once
// (capability parallel_targets when it returns true): manent then sends Request.Parallelism > 1.
type ParallelDeployer interface {
	ParallelTargets() bool
}

// Capability names, as Configure announces them.
const (
	CapDryRun          = "dry_run"
	CapCurrentRelease  = "current_release"
	CapRollback        = "rollback"
	CapSlots           = "slots"
	CapTrafficRouter   = "traffic_router"
	CapTesters         = "testers"
	CapScale           = "scale"
	CapParallelTargets = "parallel_targets"
)

// Capabilities lists what d implements, sorted, as Configure announces it.
func Capabilities(d Deployer) []string {
	caps := []string{}
	if _, ok := d.(ReleaseInspector); ok {
		caps = append(caps, CapCurrentRelease)
	}
	if _, ok := d.(DryRunner); ok {
		caps = append(caps, CapDryRun)
	}
	if p, ok := d.(ParallelDeployer); ok && p.ParallelTargets() {
		caps = append(caps, CapParallelTargets)
	}
	if _, ok := d.(Rollbacker); ok {
		caps = append(caps, CapRollback)
	}
	if _, ok := d.(SlotScaler); ok {
		caps = append(caps, CapScale)
	}
	if _, ok := d.(SlotDeployer); ok {
		caps = append(caps, CapSlots)
	}
	if _, ok := d.(TesterRouter); ok {
		caps = append(caps, CapTesters)
	}
	if _, ok := d.(TrafficRouter); ok {
		caps = append(caps, CapTrafficRouter)
	}
	return caps
}
