package external

import (
	"encoding/json"
	"time"

	"manent.dev/sdk/go/plugin"
	pb "manent.dev/sdk/go/proto/pluginv1"
)

func artifactFromWire(a *pb.Artifact) plugin.Artifact {
	if a == nil {
		return plugin.Artifact{}
	}
	return plugin.Artifact{Type: a.Type, Name: a.Name, Version: a.Version, URI: a.Uri, SHA256: a.Sha256}
}

func artifactToWire(a plugin.Artifact) *pb.Artifact {
	return &pb.Artifact{Type: a.Type, Name: a.Name, Version: a.Version, Uri: a.URI, Sha256: a.SHA256}
}

func poolFromWire(p *pb.Pool) plugin.Pool {
	if p == nil {
		return plugin.Pool{}
	}
	return plugin.Pool{Slot: p.Slot, Version: p.Version, Addresses: p.Addresses}
}

func poolToWire(p plugin.Pool) *pb.Pool {
	return &pb.Pool{Slot: p.Slot, Version: p.Version, Addresses: p.Addresses}
}

func routingFromWire(r *pb.Routing) *plugin.Routing {
	if r == nil {
		return nil
	}
	return &plugin.Routing{
		Stable:    poolFromWire(r.Stable),
		Candidate: poolFromWire(r.Candidate),
		Weight:    r.Weight,
		Testers:   r.Testers,
		Scale:     r.Scale,
		Retired:   r.Retired,
	}
}

func routingToWire(r *plugin.Routing) *pb.Routing {
	if r == nil {
		return nil
	}
	return &pb.Routing{
		Stable:    poolToWire(r.Stable),
		Candidate: poolToWire(r.Candidate),
		Weight:    r.Weight,
		Testers:   r.Testers,
		Scale:     r.Scale,
		Retired:   r.Retired,
	}
}

// requestFromWire converts a request; its secrets are set by the caller.
func requestFromWire(w *pb.DeployRequest) *plugin.Request {
	if w == nil {
		w = &pb.DeployRequest{}
	}
	r := &plugin.Request{
		DeploymentID:   w.DeploymentId,
		Application:    w.Application,
		Environment:    w.Environment,
		Artifact:       artifactFromWire(w.Artifact),
		Params:         json.RawMessage("{}"),
		Routing:        routingFromWire(w.Routing),
		IdempotencyKey: w.IdempotencyKey,
		Attempt:        w.Attempt,
		Parallelism:    w.Parallelism,
	}
	if len(w.ParamsJson) > 0 {
		r.Params = json.RawMessage(w.ParamsJson)
	}
	if len(w.Traffic) > 0 {
		r.Traffic = json.RawMessage(w.Traffic)
	}
	for _, t := range w.Targets {
		if t == nil {
			continue
		}
		r.Targets = append(r.Targets, plugin.Target{Host: t.Host, Moniker: t.Moniker, Labels: t.Labels})
	}
	return r
}

// resultToWire converts a result; name and release fill in what the plugin left empty.
func resultToWire(r *plugin.Result, name, release string) *pb.DeployResponse {
	out := &pb.DeployResponse{Plugin: name, Release: release}
	if r == nil {
		return out
	}
	if r.Plugin != "" {
		out.Plugin = r.Plugin
	}
	if r.Release != "" {
		out.Release = r.Release
	}
	for _, t := range r.Targets {
		d := t.Duration
		if d < 0 {
			d = 0
		}
		out.Targets = append(out.Targets, &pb.TargetResult{
			Host:       t.Host,
			Status:     string(t.Status),
			Message:    t.Message,
			DurationMs: uint64(d / time.Millisecond),
		})
	}
	return out
}

func releaseFromWire(r *pb.Release) plugin.Release {
	if r == nil {
		return plugin.Release{}
	}
	return plugin.Release{Version: r.Version, Artifact: artifactFromWire(r.Artifact), DeploymentID: r.DeploymentId}
}

func trafficToWire(t *plugin.Traffic) *pb.TrafficResponse {
	out := &pb.TrafficResponse{}
	if t == nil {
		return out
	}
	out.FromMs, out.WindowMs, out.Source = t.FromMs, t.WindowMs, t.Source
	for _, s := range t.Slots {
		w := &pb.SlotTraffic{
			Slot: s.Slot, Version: s.Version, Requests: s.Requests,
			Responses_2Xx: s.Responses2xx, Responses_3Xx: s.Responses3xx,
			Responses_4Xx: s.Responses4xx, Responses_5Xx: s.Responses5xx,
			RetriedAway: s.RetriedAway, P50Ms: s.P50Ms, P95Ms: s.P95Ms, P99Ms: s.P99Ms,
			NoLatency: s.NoLatency,
		}
		for _, i := range s.Intervals {
			w.Intervals = append(w.Intervals, &pb.TrafficInterval{FromMs: i.FromMs, Requests: i.Requests, Errors: i.Errors, P99Ms: i.P99Ms})
		}
		out.Slots = append(out.Slots, w)
	}
	return out
}
