package external

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"manent.dev/sdk/go/plugin"
	pb "manent.dev/sdk/go/proto/pluginv1"
)

// server is the Deployer service in front of the plugin built by the factory.
type server struct {
	pb.UnimplementedDeployerServer

	name        string
	log         hclog.Logger
	factory     plugin.Factory
	conformance bool

	mu     sync.RWMutex
	d      plugin.Deployer
	broker *goplugin.GRPCBroker
}

func (s *server) deployer() (plugin.Deployer, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.d == nil {
		return nil, status.Error(codes.FailedPrecondition, "Configure has not been called")
	}
	return s.d, nil
}

func unimplemented(call string) error {
	return status.Errorf(codes.Unimplemented, "this plugin does not implement %s", call)
}

// open converts a request and, when it carries secrets, opens them for the call; done closes them.
func (s *server) open(w *pb.DeployRequest) (r *plugin.Request, done func()) {
	r = s.request(w)
	s.mu.RLock()
	b := s.broker
	s.mu.RUnlock()
	if id := w.GetSecretsBrokerId(); id != 0 && b != nil {
		sec := openSecrets(b, id)
		r.WithSecrets(sec)
		return r, sec.close
	}
	return r, func() {}
}

// request converts a request and gives it the call's logger.
func (s *server) request(w *pb.DeployRequest) *plugin.Request {
	r := requestFromWire(w)
	r.Logger = callLogger(s.log, r)
	return r
}

// callLogger is log naming r's deployment, and its target when r has one.
func callLogger(log hclog.Logger, r *plugin.Request) hclog.Logger {
	if r.DeploymentID == "" {
		return log
	}
	log = log.With("deployment_id", r.DeploymentID)
	if len(r.Targets) == 1 {
		log = log.With("target", r.Targets[0].Name(), "moniker", r.Targets[0].Moniker)
	}
	return log
}

func (s *server) Configure(ctx context.Context, req *pb.ConfigureRequest) (*pb.ConfigureResponse, error) {
	config := json.RawMessage("{}")
	if len(req.ConfigJson) > 0 {
		if !json.Valid(req.ConfigJson) {
			return nil, status.Error(codes.InvalidArgument, "config_json is not JSON")
		}
		config = json.RawMessage(req.ConfigJson)
	}
	d, err := s.factory(config, s.log)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if d == nil {
		return nil, status.Error(codes.InvalidArgument, "the plugin's factory returned no deployer")
	}
	s.mu.Lock()
	s.d = d
	s.mu.Unlock()
	return &pb.ConfigureResponse{Name: s.name, Capabilities: plugin.Capabilities(d)}, nil
}

func (s *server) Supports(ctx context.Context, req *pb.SupportsRequest) (*pb.SupportsResponse, error) {
	d, err := s.deployer()
	if err != nil {
		return nil, err
	}
	sup, ok := d.(plugin.Supporter)
	if !ok {
		return &pb.SupportsResponse{Supported: true}, nil
	}
	a := artifactFromWire(req.Artifact)
	yes, err := sup.Supports(ctx, &a)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.SupportsResponse{Supported: yes}, nil
}

func (s *server) Validate(ctx context.Context, req *pb.DeployRequest) (*pb.Empty, error) {
	d, err := s.deployer()
	if err != nil {
		return nil, err
	}
	// Validate never carries secrets.
	r := s.request(req)
	if c, ok := s.conformanceOf(r); ok {
		return &pb.Empty{}, c.validate()
	}
	if err := d.Validate(ctx, r); err != nil {
		return nil, toStatus(err)
	}
	return &pb.Empty{}, nil
}

func (s *server) Deploy(ctx context.Context, req *pb.DeployRequest) (*pb.DeployResponse, error) {
	d, err := s.deployer()
	if err != nil {
		return nil, err
	}
	r, done := s.open(req)
	defer done()
	if c, ok := s.conformanceOf(r); ok {
		return c.deploy(ctx, s, r)
	}
	res, err := d.Deploy(ctx, r)
	if err != nil {
		return nil, toStatus(err)
	}
	return resultToWire(res, s.name, r.Artifact.Version), nil
}

func (s *server) DryRun(ctx context.Context, req *pb.DeployRequest) (*pb.DeployResponse, error) {
	d, err := s.deployer()
	if err != nil {
		return nil, err
	}
	dr, ok := d.(plugin.DryRunner)
	if !ok {
		return nil, unimplemented("DryRun")
	}
	r, done := s.open(req)
	defer done()
	res, err := dr.DryRun(ctx, r)
	if err != nil {
		return nil, toStatus(err)
	}
	return resultToWire(res, s.name, ""), nil
}

func (s *server) CurrentRelease(ctx context.Context, req *pb.DeployRequest) (*pb.CurrentReleaseResponse, error) {
	d, err := s.deployer()
	if err != nil {
		return nil, err
	}
	ri, ok := d.(plugin.ReleaseInspector)
	if !ok {
		return nil, unimplemented("CurrentRelease")
	}
	r, done := s.open(req)
	defer done()
	rels, err := ri.CurrentRelease(ctx, r)
	if err != nil {
		return nil, toStatus(err)
	}
	out := &pb.CurrentReleaseResponse{}
	for _, t := range rels {
		out.Targets = append(out.Targets, &pb.TargetRelease{Host: t.Host, Version: t.Version})
	}
	return out, nil
}

func (s *server) Rollback(ctx context.Context, req *pb.RollbackRequest) (*pb.DeployResponse, error) {
	d, err := s.deployer()
	if err != nil {
		return nil, err
	}
	rb, ok := d.(plugin.Rollbacker)
	if !ok {
		return nil, unimplemented("Rollback")
	}
	to := releaseFromWire(req.To)
	r, done := s.open(req.Request)
	defer done()
	res, err := rb.Rollback(ctx, r, to)
	if err != nil {
		return nil, toStatus(err)
	}
	return resultToWire(res, s.name, to.Version), nil
}

func (s *server) slots(call string) (plugin.SlotDeployer, error) {
	d, err := s.deployer()
	if err != nil {
		return nil, err
	}
	sd, ok := d.(plugin.SlotDeployer)
	if !ok {
		return nil, unimplemented(call)
	}
	return sd, nil
}

func (s *server) PrepareSlots(ctx context.Context, req *pb.DeployRequest) (*pb.StateResponse, error) {
	sd, err := s.slots("PrepareSlots")
	if err != nil {
		return nil, err
	}
	r, done := s.open(req)
	defer done()
	state, err := sd.PrepareSlots(ctx, r)
	if err != nil {
		return nil, toStatus(err)
	}
	if len(state) > 0 && !json.Valid(state) {
		return nil, status.Error(codes.Internal, "PrepareSlots returned a state that is not JSON")
	}
	return &pb.StateResponse{StateJson: state}, nil
}

func (s *server) DeployCandidate(ctx context.Context, req *pb.DeployRequest) (*pb.DeployResponse, error) {
	sd, err := s.slots("DeployCandidate")
	if err != nil {
		return nil, err
	}
	r, done := s.open(req)
	defer done()
	res, err := sd.DeployCandidate(ctx, r)
	if err != nil {
		return nil, toStatus(err)
	}
	return resultToWire(res, s.name, r.Artifact.Version), nil
}

func (s *server) slotCall(ctx context.Context, call string, req *pb.DeployRequest, f func(plugin.SlotDeployer, context.Context, *plugin.Request) error) (*pb.Empty, error) {
	sd, err := s.slots(call)
	if err != nil {
		return nil, err
	}
	r, done := s.open(req)
	defer done()
	if err := f(sd, ctx, r); err != nil {
		return nil, toStatus(err)
	}
	return &pb.Empty{}, nil
}

func (s *server) PromoteCandidate(ctx context.Context, req *pb.DeployRequest) (*pb.Empty, error) {
	return s.slotCall(ctx, "PromoteCandidate", req, plugin.SlotDeployer.PromoteCandidate)
}

func (s *server) RevertCandidate(ctx context.Context, req *pb.DeployRequest) (*pb.Empty, error) {
	return s.slotCall(ctx, "RevertCandidate", req, plugin.SlotDeployer.RevertCandidate)
}

func (s *server) RetirePrevious(ctx context.Context, req *pb.DeployRequest) (*pb.Empty, error) {
	return s.slotCall(ctx, "RetirePrevious", req, plugin.SlotDeployer.RetirePrevious)
}

func (s *server) router(call string) (plugin.TrafficRouter, error) {
	d, err := s.deployer()
	if err != nil {
		return nil, err
	}
	tr, ok := d.(plugin.TrafficRouter)
	if !ok {
		return nil, unimplemented(call)
	}
	return tr, nil
}

func (s *server) SetCandidateWeight(ctx context.Context, req *pb.WeightRequest) (*pb.Empty, error) {
	tr, err := s.router("SetCandidateWeight")
	if err != nil {
		return nil, err
	}
	r, done := s.open(req.Request)
	defer done()
	if err := tr.SetCandidateWeight(ctx, r, req.Weight); err != nil {
		return nil, toStatus(err)
	}
	return &pb.Empty{}, nil
}

func (s *server) CandidateWeight(ctx context.Context, req *pb.DeployRequest) (*pb.WeightResponse, error) {
	tr, err := s.router("CandidateWeight")
	if err != nil {
		return nil, err
	}
	r, done := s.open(req)
	defer done()
	w, err := tr.CandidateWeight(ctx, r)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.WeightResponse{Weight: w}, nil
}

func (s *server) RoutingState(ctx context.Context, req *pb.DeployRequest) (*pb.RoutingStateResponse, error) {
	tr, err := s.router("RoutingState")
	if err != nil {
		return nil, err
	}
	rs, ok := tr.(plugin.RoutingStater)
	if !ok {
		return nil, unimplemented("RoutingState")
	}
	r, done := s.open(req)
	defer done()
	st, err := rs.RoutingState(ctx, r)
	if err != nil {
		return nil, toStatus(err)
	}
	if st == nil {
		return &pb.RoutingStateResponse{}, nil
	}
	return &pb.RoutingStateResponse{Routing: routingToWire(st.Routing), Foreign: st.Foreign}, nil
}

func (s *server) Traffic(ctx context.Context, req *pb.TrafficRequest) (*pb.TrafficResponse, error) {
	tr, err := s.router("Traffic")
	if err != nil {
		return nil, err
	}
	rep, ok := tr.(plugin.TrafficReporter)
	if !ok {
		return nil, status.Error(codes.Unimplemented, "this router does not report the traffic it observes (Traffic)")
	}
	if req.Request == nil {
		return nil, status.Error(codes.InvalidArgument, "Traffic without its request")
	}
	r, done := s.open(req.Request)
	defer done()
	window := plugin.TrafficWindow{Last: time.Duration(req.WindowMs) * time.Millisecond}
	if req.SinceMs > 0 {
		window.Since = time.UnixMilli(req.SinceMs)
	}
	t, err := rep.Traffic(ctx, r, window)
	if err != nil {
		return nil, toStatus(err)
	}
	return trafficToWire(t), nil
}

func (s *server) RouteTesters(ctx context.Context, req *pb.DeployRequest) (*pb.DetailsResponse, error) {
	d, err := s.deployer()
	if err != nil {
		return nil, err
	}
	tr, ok := d.(plugin.TesterRouter)
	if !ok {
		return nil, unimplemented("RouteTesters")
	}
	r, done := s.open(req)
	defer done()
	details, err := tr.RouteTesters(ctx, r)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.DetailsResponse{Details: details}, nil
}

func (s *server) ScaleCandidate(ctx context.Context, req *pb.WeightRequest) (*pb.Empty, error) {
	d, err := s.deployer()
	if err != nil {
		return nil, err
	}
	sc, ok := d.(plugin.SlotScaler)
	if !ok {
		return nil, unimplemented("ScaleCandidate")
	}
	r, done := s.open(req.Request)
	defer done()
	if err := sc.ScaleCandidate(ctx, r, req.Weight); err != nil {
		return nil, toStatus(err)
	}
	return &pb.Empty{}, nil
}

// panicked is what a call that panicked answers: UNKNOWN (retryable), the stack in the log.
func (s *server) panicked(req interface{}, method string, v interface{}, stack []byte) error {
	log := s.log
	if w := wireRequest(req); w.GetDeploymentId() != "" {
		// Said with the call's deployment, so `manent logs DEP` has it.
		log = log.With("deployment_id", w.GetDeploymentId())
	}
	log.Error("plugin panicked", "call", method, "panic", fmt.Sprint(v), "stack", string(stack))
	return status.Errorf(codes.Unknown, "the plugin panicked in %s: %v", method, v)
}
