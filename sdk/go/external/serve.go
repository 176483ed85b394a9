// Package external serves a manent plugin over hashicorp/go-plugin's gRPC protocol: a
// binary's whole main is external.Serve(factory).
package external

import (
	"bufio"
	"context"
	"io"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"manent.dev/sdk/go/plugin"
	pb "manent.dev/sdk/go/proto/pluginv1"
)

// The handshake manent's host expects.
const (
	MagicCookieKey     = "MANENT_PLUGIN"
	MagicCookieValue   = "d3c0ded-manent-plugin"
	AppProtocolVersion = 1
)

// The process's real stdout and stderr, taken before go-plugin replaces them with pipes.
var (
	realStdout = os.Stdout
	realStderr = os.Stderr
)

// hclog's JSON timestamp as manent parses it: exactly six fractional digits.
const jsonTimeFormat = "2006-01-02T15:04:05.000000Z07:00"

var (
	loggerOnce sync.Once
	logger     hclog.Logger
)

// Name is the plugin's name: the binary's base name. Configure answers it and the logger
// carries it as @module.
func Name() string {
	if len(os.Args) == 0 || os.Args[0] == "" {
		return "plugin"
	}
	return filepath.Base(os.Args[0])
}

// Logger is the plugin's logger, the one the factory receives: hclog JSON lines on stderr at
// every level from trace, named after the binary. manent keeps each line with its level and
// attributes (a "target" attribute ties it to a target).
func Logger() hclog.Logger {
	loggerOnce.Do(func() {
		logger = hclog.New(&hclog.LoggerOptions{
			Name:       Name(),
			Level:      hclog.Trace,
			Output:     realStderr,
			JSONFormat: true,
			TimeFormat: jsonTimeFormat,
		})
	})
	return logger
}

// Serve serves the plugin built by factory until the host shuts it down, then exits; it never
// returns. Run by hand (without the host's magic cookie) it says what it is and exits 1.
func Serve(factory plugin.Factory) {
	if os.Getenv(MagicCookieKey) != MagicCookieValue {
		io.WriteString(realStderr, "This binary is a manent plugin. It is not meant to be run by hand: declare it under "+
			"`plugins:` in manent.yml and manent starts it when a deploy needs it.\n")
		os.Exit(1)
	}
	waitForDebugger(Logger())
	log := Logger()
	srv := &server{
		name:        Name(),
		log:         log,
		factory:     factory,
		conformance: os.Getenv(conformanceEnv) == "1",
	}
	p := &stopper{log: log}
	plugins := map[string]goplugin.Plugin{"deployer": &deployerPlugin{srv: srv}}
	parent := os.Getppid()
	// A host that died leaves stderr a broken pipe: a log line must not kill the plugin
	// (SIGPIPE) in the middle of its work; the parent watch stops it in order instead.
	// (Notify, not Ignore: an ignored SIGPIPE would be inherited by the commands it runs.)
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	guardStdout(log)
	go watchParent(parent, p)
	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig: goplugin.HandshakeConfig{
			ProtocolVersion:  AppProtocolVersion,
			MagicCookieKey:   MagicCookieKey,
			MagicCookieValue: MagicCookieValue,
		},
		Plugins: plugins,
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			opts = append(opts,
				grpc.MaxRecvMsgSize(math.MaxInt32),
				grpc.UnaryInterceptor(p.intercept(srv)))
			s := grpc.NewServer(opts...)
			p.set(s)
			return s
		},
		Logger: log,
	})
	// go-plugin returns as soon as the server stops accepting; calls still running get the
	// grace the stop gives them.
	if !p.asked() {
		// Nobody asked it to stop: it failed (its listener, before or after the handshake).
		log.Error("go-plugin stopped serving before the host asked it to")
		os.Exit(1)
	}
	p.wait()
	os.Exit(0)
}

// deployerPlugin is the go-plugin plugin: the plugin side only.
type deployerPlugin struct {
	goplugin.NetRPCUnsupportedPlugin
	srv *server
}

func (d *deployerPlugin) GRPCServer(b *goplugin.GRPCBroker, s *grpc.Server) error {
	fixBrokerTLS(b, d.srv.log)
	d.srv.mu.Lock()
	d.srv.broker = b
	d.srv.mu.Unlock()
	pb.RegisterDeployerServer(s, d.srv)
	return nil
}

func (d *deployerPlugin) GRPCClient(context.Context, *goplugin.GRPCBroker, *grpc.ClientConn) (interface{}, error) {
	return nil, errPluginSideOnly
}

type sdkError string

func (e sdkError) Error() string { return string(e) }

const errPluginSideOnly = sdkError("the manent SDK serves plugins; it is not a host")

// stopper stops the gRPC server gracefully: on the host's Shutdown, and when the host is gone.
type stopper struct {
	log    hclog.Logger
	mu     sync.Mutex
	server *grpc.Server
	once   sync.Once
	done   chan struct{}
	// calls running in the plugin: a stop lets them return before the process exits.
	calls sync.WaitGroup
}

func (p *stopper) set(s *grpc.Server) {
	p.mu.Lock()
	p.server = s
	p.mu.Unlock()
}

// stop lets the plugin's running calls finish for up to grace, then stops the server: calls
// still running see their ctx cancelled and get half a second more to return. (grpc's
// GracefulStop would also wait for the host's broker stream, which lasts as long as the host.)
func (p *stopper) stop(grace time.Duration) {
	p.once.Do(func() {
		p.mu.Lock()
		s := p.server
		p.done = make(chan struct{})
		done := p.done
		p.mu.Unlock()
		go func() {
			defer close(done)
			if !p.callsReturn(grace) {
				p.log.Warn("calls still running at shutdown: cancelling them")
			}
			if s != nil {
				s.Stop()
			}
			p.callsReturn(500 * time.Millisecond)
		}()
	})
}

// callsReturn waits up to d for the running calls to return.
func (p *stopper) callsReturn(d time.Duration) bool {
	returned := make(chan struct{})
	go func() {
		p.calls.Wait()
		close(returned)
	}()
	select {
	case <-returned:
		return true
	case <-time.After(d):
		return false
	}
}

// asked says whether a stop was started (the host's Shutdown, or the host gone).
func (p *stopper) asked() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done != nil
}

// wait returns once a stop that was started has ended.
func (p *stopper) wait() {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done != nil {
		<-done
	}
}

const shutdownMethod = "/plugin.GRPCController/Shutdown"

// intercept answers the host's Shutdown before stopping (go-plugin's own controller stops hard
// first, so the host sees the connection drop), and turns a panic in a plugin call into
// UNKNOWN with the stack in the log instead of the end of the process.
func (p *stopper) intercept(srv *server) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req interface{}, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp interface{}, err error) {
		if info.FullMethod == shutdownMethod {
			p.log.Debug("the host asks the plugin to stop")
			go func() {
				time.Sleep(20 * time.Millisecond)
				p.stop(time.Second)
			}()
			// go-plugin's Empty and ours encode alike: no bytes.
			return &pb.Empty{}, nil
		}
		if strings.HasPrefix(info.FullMethod, "/manent.plugin.v1.Deployer/") {
			p.calls.Add(1)
			defer p.calls.Done()
			if srv.conformance {
				defer callEnded(ctx, srv.log, info.FullMethod, req, time.Now())
			}
			defer func() {
				if v := recover(); v != nil {
					resp = nil
					err = srv.panicked(req, strings.TrimPrefix(info.FullMethod, "/manent.plugin.v1.Deployer/"), v, debug.Stack())
				}
			}()
		}
		return handler(ctx, req)
	}
}

// waitForDebugger, when manent started the plugin for a debugger (MANENT_PLUGIN_WAIT_FOR_DEBUGGER=1:
// its MANENT_PLUGIN_DEBUG names this plugin), waits until one is attached (a tracer in
// /proc/self/status, as delve's `dlv attach PID` makes) before anything else.
func waitForDebugger(log hclog.Logger) {
	if os.Getenv("MANENT_PLUGIN_WAIT_FOR_DEBUGGER") != "1" {
		return
	}
	// Any process of this user may attach, not only an ancestor (Ubuntu's default
	// kernel.yama.ptrace_scope=1 refuses `dlv attach` from another terminal otherwise).
	const prSetPtracer, prSetPtracerAny = 0x59616d61, ^uintptr(0)
	syscall.Syscall(syscall.SYS_PRCTL, prSetPtracer, prSetPtracerAny, 0)
	log.Warn("waiting for a debugger to attach", "pid", os.Getpid())
	for !traced() {
		time.Sleep(100 * time.Millisecond)
	}
	log.Info("a debugger is attached: serving")
}

// traced is true while a debugger (a tracer) is attached to the process.
func traced() bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v := strings.TrimPrefix(l, "TracerPid:"); v != l {
			return strings.TrimSpace(v) != "0"
		}
	}
	return false
}

// CallEnded is what the SDK logs (at debug) when a call returns, with call, idempotency_key,
// ms and cancelled — when the conformance kit started the plugin, which reads how long a
// cancelled call ran on from it.
const CallEnded = "call ended"

// callEnded logs CallEnded for a call of req that started at started.
func callEnded(ctx context.Context, log hclog.Logger, method string, req interface{}, started time.Time) {
	w := wireRequest(req)
	if w.GetDeploymentId() == "" {
		return
	}
	log.Debug(CallEnded, "deployment_id", w.GetDeploymentId(),
		"call", strings.TrimPrefix(method, "/manent.plugin.v1.Deployer/"),
		"idempotency_key", w.GetIdempotencyKey(), "ms", time.Since(started).Milliseconds(),
		"cancelled", ctx.Err() != nil)
}

// wireRequest is the DeployRequest a call carries (nil for Configure and Supports).
func wireRequest(req interface{}) *pb.DeployRequest {
	switch r := req.(type) {
	case *pb.DeployRequest:
		return r
	case *pb.RollbackRequest:
		return r.GetRequest()
	case *pb.WeightRequest:
		return r.GetRequest()
	case *pb.TrafficRequest:
		return r.GetRequest()
	}
	return nil
}

// watchParent stops the plugin when its parent changes: a host killed outright never says
// Shutdown, and the plugin must not live on as an orphan.
func watchParent(parent int, p *stopper) {
	for range time.Tick(time.Second) {
		if os.Getppid() != parent {
			p.log.Warn("the host is gone; stopping", "parent", parent)
			p.stop(2 * time.Second)
			p.wait()
			os.Exit(1)
		}
	}
}

// guardStdout keeps stdout for the handshake line alone. os.Stdout becomes a pipe until
// go-plugin has written the line through it; the line goes to the real stdout, then fd 1 is
// pointed at stderr and os.Stdout/os.Stderr are the real files again (go-plugin leaves pipes
// there that nobody reads in 1.0.1, which block a plugin after 64 KiB). A stray fmt.Println
// afterwards becomes a line on stderr, which the host stores at info.
func guardStdout(log hclog.Logger) {
	r, w, err := os.Pipe()
	if err != nil {
		log.Warn("cannot guard stdout", "error", err)
		return
	}
	os.Stdout = w
	go func() {
		br := bufio.NewReader(r)
		line, err := br.ReadBytes('\n')
		if _, werr := realStdout.Write(line); werr != nil || err != nil {
			return
		}
		if err := redirectStdout(); err != nil {
			log.Warn("cannot point stdout at stderr", "error", err)
		}
		// go-plugin swaps os.Stdout, then os.Stderr, right after writing the line: wait for
		// both, or the second would land after ours.
		for deadline := time.Now().Add(5 * time.Second); (os.Stdout == w || os.Stderr == realStderr) && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		os.Stdout = realStdout
		os.Stderr = realStderr
		w.Close()
		io.Copy(realStderr, br)
		r.Close()
	}()
}
