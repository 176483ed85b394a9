package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	hclog "github.com/hashicorp/go-hclog"
)

// Artifact is what to deploy.
type Artifact struct {
	Type    string
	Name    string
	Version string
	// URI where the artifact can be fetched (file://…, https://…, an image reference).
	URI    string
	SHA256 string
}

// Target is one machine (or slot, or service) of the environment.
type Target struct {
	Host string
	// Moniker is <namespace>::<module>::<type>::<name>.
	Moniker string
	Labels  map[string]string
}

// Name is the last part of the moniker: the target's name in the descriptor.
func (t Target) Name() string {
	if i := strings.LastIndex(t.Moniker, "::"); i >= 0 {
		return t.Moniker[i+2:]
	}
	return t.Moniker
}

// Pool is one side of a split: a slot, the release it holds, its servers' addresses in
// target order.
type Pool struct {
	Slot      string
	Version   string
	Addresses []string
}

// Routing is a canary's routing as manent records it; nil outside canaries.
type Routing struct {
	Stable    Pool
	Candidate Pool
	// Weight is the percent of production requests sent to the candidate.
	Weight uint32
	// Testers reach the candidate.
	Testers bool
	// Scale is the percent of the candidate's servers enabled.
	Scale uint32
	// Retired: the candidate is out of every pool.
	Retired bool
}

// SecretReader reads secrets by name. The SDK gives each call one that reads through the
// host's broker for the duration of the call; tests can use StaticSecrets.
type SecretReader interface {
	Secret(ctx context.Context, name string) (string, error)
}

// StaticSecrets is a SecretReader over a map, for tests. An unknown name is a permanent error.
type StaticSecrets map[string]string

// Secret implements SecretReader.
func (s StaticSecrets) Secret(_ context.Context, name string) (string, error) {
	v, ok := s[name]
	if !ok {
		return "", Permanent(errors.New("secret " + name + " is not granted to this call"))
	}
	return v, nil
}

// ErrNoSecrets is returned (permanent) by Request.Secret when the call carries no secrets:
// Validate never does, and a deploy only when its descriptor grants secrets to the plugin.
var ErrNoSecrets = Permanent(errors.New("this call carries no secrets (grant them with deploy.secrets in the descriptor; Validate never gets any)"))

// Request is one call's request.
type Request struct {
	DeploymentID string
	Application  string
	Environment  string
	Artifact     Artifact
	Targets      []Target
	// Params is deploy.params from the descriptor (a JSON object, "{}" when none).
	Params json.RawMessage
	// Traffic is the state PrepareSlots returned (JSON), carried in every later canary call.
	Traffic json.RawMessage
	// Routing is the canary's routing; nil outside canaries.
	Routing *Routing
	// IdempotencyKey is stable across retries and restarts of the step: "{deployment_id}/{step}".
	IdempotencyKey string
	// Attempt of the step, from 1.
	Attempt uint32
	// Parallelism is how many targets the plugin may work on at once (1 unless it announces
	// parallel_targets).
	Parallelism uint32
	// Logger is the call's logger, set by the SDK: read it with Log (a Request built by hand,
	// in a test, logs nowhere).
	Logger hclog.Logger

	secrets SecretReader
}

// Log is the call's logger: every line names the call's deployment (and its target when the
// call has one), so `manent logs DEP` shows it. Log per target with TargetLog.
func (r *Request) Log() hclog.Logger {
	if r.Logger == nil {
		return hclog.NewNullLogger()
	}
	return r.Logger
}

// TargetLog is the call's logger for lines about target t.
func (r *Request) TargetLog(t Target) hclog.Logger {
	return r.Log().With("target", t.Name(), "moniker", t.Moniker)
}

// DecodeParams unmarshals Params into v (no params decode as an empty object).
func (r *Request) DecodeParams(v any) error {
	if len(r.Params) == 0 {
		return json.Unmarshal([]byte("{}"), v)
	}
	return json.Unmarshal(r.Params, v)
}

// Secret reads the secret name granted to this call. It works only while the call runs.
// Errors from the host's refusal (a secret not granted, a call already returned) are
// permanent; a call without secrets gets ErrNoSecrets.
func (r *Request) Secret(ctx context.Context, name string) (string, error) {
	if r.secrets == nil {
		return "", ErrNoSecrets
	}
	return r.secrets.Secret(ctx, name)
}

// WithSecrets sets where Secret reads from and returns r. The SDK uses it for every call;
// plugin tests can pass StaticSecrets.
func (r *Request) WithSecrets(s SecretReader) *Request {
	r.secrets = s
	return r
}

// Status is a target's outcome.
type Status string

// Target statuses.
const (
	StatusDeployed   Status = "deployed"
	StatusFailed     Status = "failed"
	StatusSkipped    Status = "skipped"
	StatusUnchanged  Status = "unchanged"
	StatusRolledBack Status = "rolled_back"
)

// TargetResult is one target's outcome.
type TargetResult struct {
	Host     string
	Status   Status
	Message  string
	Duration time.Duration
}

// Result is a call's outcome per target.
type Result struct {
	// Plugin is the plugin's name; the SDK fills it in when empty.
	Plugin  string
	Targets []TargetResult
	// Release is the version now live; the SDK uses the artifact's version when empty.
	Release string
}

// Release is an earlier release to roll back to.
type Release struct {
	Version      string
	Artifact     Artifact
	DeploymentID string
}

// TargetRelease is what is live on one target; Version is empty when the plugin cannot tell.
type TargetRelease struct {
	Host    string
	Version string
}

// RoutingState is what the running router serves. Foreign is non-empty when the router runs a
// configuration manent did not write: why, and where Routing was read from instead.
type RoutingState struct {
	Routing *Routing
	Foreign string
}

// TrafficWindow is what a Traffic call reads: the Last duration before now, never from before
// Since (zero when not known), when the candidate release began serving.
type TrafficWindow struct {
	Last  time.Duration
	Since time.Time
}

// From is where the window starts at now.
func (w TrafficWindow) From(now time.Time) time.Time {
	from := now.Add(-w.Last)
	if !w.Since.IsZero() && w.Since.After(from) {
		return w.Since
	}
	return from
}

// TrafficInterval is a slice of the window, oldest first.
type TrafficInterval struct {
	FromMs   int64
	Requests uint64
	// Errors are 5xx responses.
	Errors uint64
	P99Ms  uint32
}

// SlotTraffic is one slot's traffic over the window, as the router saw it.
type SlotTraffic struct {
	Slot         string
	Version      string
	Requests     uint64
	Responses2xx uint64
	Responses3xx uint64
	Responses4xx uint64
	Responses5xx uint64
	RetriedAway  uint64
	P50Ms        uint32
	P95Ms        uint32
	P99Ms        uint32
	Intervals    []TrafficInterval
	// NoLatency says the router measures no latency: P50Ms, P95Ms and P99Ms are not figures,
	// and a latency limit cannot be judged on them.
	NoLatency bool
}

// Traffic is what a router observed per slot.
type Traffic struct {
	Slots    []SlotTraffic
	FromMs   int64
	WindowMs uint64
	// Source says where the figures come from.
	Source string
}
