package external

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"manent.dev/sdk/go/plugin"
	pb "manent.dev/sdk/go/proto/pluginv1"
)

func code(err error) codes.Code { return status.Code(err) }

func TestErrorsMapToTheCodesTheHostReads(t *testing.T) {
	cases := []struct {
		err  error
		want codes.Code
		msg  string
	}{
		{plugin.Permanent(errors.New("no such unit")), codes.Aborted, "no such unit"},
		{fmt.Errorf("t1: %w", plugin.Permanent(errors.New("bad"))), codes.Aborted, "t1: bad"},
		{errors.New("flaky"), codes.Unknown, "flaky"},
		{status.Error(codes.InvalidArgument, "params"), codes.InvalidArgument, "params"},
		// Another service's status, wrapped: its code says nothing about this call.
		{fmt.Errorf("wrapped: %w", status.Error(codes.Aborted, "conflict")), codes.Unknown, "wrapped: rpc error: code = Aborted desc = conflict"},
		{plugin.Permanent(status.Error(codes.Unavailable, "down")), codes.Aborted, "down"},
		{context.Canceled, codes.Canceled, context.Canceled.Error()},
		{fmt.Errorf("sleep: %w", context.DeadlineExceeded), codes.DeadlineExceeded, "sleep: context deadline exceeded"},
	}
	for _, c := range cases {
		got := toStatus(c.err)
		st, _ := status.FromError(got)
		if st.Code() != c.want || st.Message() != c.msg {
			t.Errorf("%v: got %v %q, want %v %q", c.err, st.Code(), st.Message(), c.want, c.msg)
		}
	}
	if toStatus(nil) != nil {
		t.Fatal("nil stays nil")
	}
}

type fake struct {
	deployed chan context.Context
}

func (f *fake) Validate(context.Context, *plugin.Request) error { return nil }
func (f *fake) Deploy(ctx context.Context, r *plugin.Request) (*plugin.Result, error) {
	if string(r.Params) == `{"panic":true}` {
		panic("boom")
	}
	return &plugin.Result{Targets: []plugin.TargetResult{{Host: r.Targets[0].Host, Status: plugin.StatusDeployed, Duration: 1500 * time.Millisecond}}}, nil
}
func (f *fake) ParallelTargets() bool { return true }

func newServer(buf *bytes.Buffer) *server {
	log := hclog.New(&hclog.LoggerOptions{Name: "fx", Level: hclog.Trace, Output: buf, JSONFormat: true, TimeFormat: jsonTimeFormat})
	return &server{name: "fx", log: log, factory: func(c json.RawMessage, l hclog.Logger) (plugin.Deployer, error) {
		return &fake{}, nil
	}}
}

var req = &pb.DeployRequest{Artifact: &pb.Artifact{Version: "7"}, Targets: []*pb.Target{{Host: "h1", Moniker: "a::b::c::t1"}}}

func TestCallsBeforeConfigureAreRefusedAndOptionalOnesUnimplemented(t *testing.T) {
	s := newServer(&bytes.Buffer{})
	ctx := context.Background()
	if _, err := s.Deploy(ctx, req); code(err) != codes.FailedPrecondition {
		t.Fatalf("before Configure: %v", err)
	}
	if _, err := s.DryRun(ctx, req); code(err) != codes.FailedPrecondition {
		t.Fatalf("before Configure: %v", err)
	}
	resp, err := s.Configure(ctx, &pb.ConfigureRequest{})
	if err != nil || resp.Name != "fx" || strings.Join(resp.Capabilities, ",") != "parallel_targets" {
		t.Fatalf("%v %v", resp, err)
	}
	if _, err := s.DryRun(ctx, req); code(err) != codes.Unimplemented {
		t.Fatalf("DryRun: %v", err)
	}
	if _, err := s.Rollback(ctx, &pb.RollbackRequest{}); code(err) != codes.Unimplemented {
		t.Fatalf("Rollback: %v", err)
	}
	if _, err := s.Traffic(ctx, &pb.TrafficRequest{}); code(err) != codes.Unimplemented {
		t.Fatalf("Traffic: %v", err)
	}
	sup, err := s.Supports(ctx, &pb.SupportsRequest{})
	if err != nil || !sup.Supported {
		t.Fatal("Supports defaults to true")
	}
	out, err := s.Deploy(ctx, req)
	if err != nil || out.Plugin != "fx" || out.Release != "7" || out.Targets[0].DurationMs != 1500 || out.Targets[0].Status != "deployed" {
		t.Fatalf("%v %v", out, err)
	}
	if _, err := s.Configure(ctx, &pb.ConfigureRequest{ConfigJson: []byte("{nope")}); code(err) != codes.InvalidArgument {
		t.Fatalf("bad config: %v", err)
	}
}

func TestAPanicInACallIsLoggedWithItsStackAndAnswersUnknown(t *testing.T) {
	var buf bytes.Buffer
	s := newServer(&buf)
	ctx := context.Background()
	if _, err := s.Configure(ctx, &pb.ConfigureRequest{}); err != nil {
		t.Fatal(err)
	}
	p := &stopper{log: s.log}
	in := *req
	in.ParamsJson = []byte(`{"panic":true}`)
	info := &grpc.UnaryServerInfo{FullMethod: "/manent.plugin.v1.Deployer/Deploy"}
	_, err := p.intercept(s)(ctx, &in, info, func(ctx context.Context, r interface{}) (interface{}, error) {
		return s.Deploy(ctx, r.(*pb.DeployRequest))
	})
	if code(err) != codes.Unknown || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("%v", err)
	}
	var line map[string]interface{}
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("%v: %s", err, buf.String())
	}
	if line["@level"] != "error" || !strings.Contains(fmt.Sprint(line["stack"]), "external_test.go") {
		t.Fatalf("%v", line)
	}
}

func TestTheLoggerWritesHclogJSONWithSixFractionalDigits(t *testing.T) {
	var buf bytes.Buffer
	log := newServer(&buf).log
	log.Warn("hello", "target", "t1", "n", 2)
	var line map[string]interface{}
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatal(err)
	}
	if line["@level"] != "warn" || line["@message"] != "hello" || line["@module"] != "fx" || line["target"] != "t1" || line["n"] != 2.0 {
		t.Fatalf("%v", line)
	}
	ts, _ := line["@timestamp"].(string)
	if !regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}(Z|[+-]\d\d:\d\d)$`).MatchString(ts) {
		t.Fatalf("timestamp %q", ts)
	}
}

func TestTheConformanceProtocolAnswersOnlyWhenEnabledAndAsked(t *testing.T) {
	var buf bytes.Buffer
	s := newServer(&buf)
	ctx := context.Background()
	s.Configure(ctx, &pb.ConfigureRequest{})
	refuse := *req
	refuse.ParamsJson = []byte(`{"manent_conformance": {"refuse": "why"}}`)
	if _, err := s.Validate(ctx, &refuse); err != nil {
		t.Fatalf("without the variable the plugin answers: %v", err)
	}
	s.conformance = true
	if _, err := s.Validate(ctx, &refuse); code(err) != codes.InvalidArgument || status.Convert(err).Message() != "conformance: why" {
		t.Fatalf("%v", err)
	}
	for fail, want := range map[string]codes.Code{"permanent": codes.Aborted, "retryable": codes.Unknown} {
		r := *req
		r.ParamsJson = []byte(`{"manent_conformance": {"fail": "` + fail + `", "log": true}}`)
		if _, err := s.Deploy(ctx, &r); code(err) != want {
			t.Fatalf("%s: %v", fail, err)
		}
	}
	if strings.Count(buf.String(), "conformance level") != 10 {
		t.Fatalf("%s", buf.String())
	}
	r := *req
	r.IdempotencyKey = "d/3"
	r.ParamsJson = []byte(`{"manent_conformance": {"sleep_ms": 10000}}`)
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := s.Deploy(cctx, &r); code(err) != codes.Canceled {
		t.Fatalf("%v", err)
	}
	if !strings.Contains(buf.String(), `"idempotency_key":"d/3"`) {
		t.Fatalf("%s", buf.String())
	}
	r.ParamsJson = []byte(`{"manent_conformance": {}}`)
	out, err := s.Deploy(ctx, &r)
	if err != nil || out.Plugin != "fx" || out.Release != "7" || out.Targets[0].Status != "unchanged" || out.Targets[0].Message != "conformance" {
		t.Fatalf("%v %v", out, err)
	}
	r.ParamsJson = []byte(`{"manent_conformance": {"secret": "x"}}`)
	if _, err := s.Deploy(ctx, &r); code(err) != codes.Aborted {
		t.Fatalf("no secrets in the call: %v", err)
	}
}
