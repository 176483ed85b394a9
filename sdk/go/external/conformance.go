package external

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"manent.dev/sdk/go/plugin"
	pb "manent.dev/sdk/go/proto/pluginv1"
)

// The conformance protocol: with MANENT_PLUGIN_CONFORMANCE=1 in the environment (the kit
// `manent plugin test` sets it; the engine never does), a Validate or Deploy whose params hold
// "manent_conformance" is answered by the SDK itself, never by the plugin's code.
const conformanceEnv = "MANENT_PLUGIN_CONFORMANCE"

type conformance struct {
	Refuse  string
	Print   *string
	Log     bool
	Secret  string
	SleepMs uint64
	Fail    string
}

// conformanceOf returns the request's conformance probe when the protocol is on and the
// request's params hold "manent_conformance" as an object. Keys of another type are ignored.
func (s *server) conformanceOf(r *plugin.Request) (*conformance, bool) {
	if !s.conformance {
		return nil, false
	}
	var params map[string]json.RawMessage
	if json.Unmarshal(r.Params, &params) != nil {
		return nil, false
	}
	var probe map[string]json.RawMessage
	if raw, ok := params["manent_conformance"]; !ok || json.Unmarshal(raw, &probe) != nil || probe == nil {
		return nil, false
	}
	str := func(key string) *string {
		var v *string
		if json.Unmarshal(probe[key], &v) != nil {
			return nil
		}
		return v
	}
	c := &conformance{Print: str("print")}
	if v := str("refuse"); v != nil {
		c.Refuse = *v
	}
	if v := str("secret"); v != nil {
		c.Secret = *v
	}
	if v := str("fail"); v != nil {
		c.Fail = *v
	}
	_ = json.Unmarshal(probe["log"], &c.Log)
	_ = json.Unmarshal(probe["sleep_ms"], &c.SleepMs)
	return c, true
}

func (c *conformance) validate() error {
	if c.Refuse != "" {
		return status.Error(codes.InvalidArgument, "conformance: "+c.Refuse)
	}
	return nil
}

func (c *conformance) deploy(ctx context.Context, s *server, r *plugin.Request) (*pb.DeployResponse, error) {
	if c.Print != nil {
		// The ordinary print: after the handshake stdout leads to stderr.
		fmt.Println(*c.Print)
	}
	if c.Log {
		s.log.Trace("conformance level trace")
		s.log.Debug("conformance level debug")
		s.log.Info("conformance level info")
		s.log.Warn("conformance level warn")
		s.log.Error("conformance level error")
	}
	if c.Secret != "" {
		v, err := r.Secret(ctx, c.Secret)
		if err != nil {
			return nil, toStatus(err)
		}
		sum := sha256.Sum256([]byte(v))
		s.log.Info("conformance secret", "sha256", hex.EncodeToString(sum[:]))
	}
	if c.SleepMs > 0 {
		t := time.NewTimer(time.Duration(c.SleepMs) * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			s.log.Warn("conformance cancelled", "idempotency_key", r.IdempotencyKey)
			return nil, status.Error(codes.Canceled, "conformance: cancelled")
		}
	}
	switch c.Fail {
	case "permanent":
		return nil, status.Error(codes.Aborted, "conformance: permanent failure")
	case "retryable":
		return nil, status.Error(codes.Unknown, "conformance: retryable failure")
	}
	out := &pb.DeployResponse{Plugin: s.name, Release: r.Artifact.Version}
	for _, t := range r.Targets {
		out.Targets = append(out.Targets, &pb.TargetResult{Host: t.Host, Status: string(plugin.StatusUnchanged), Message: "conformance"})
	}
	return out, nil
}
