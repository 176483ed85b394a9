package external

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"reflect"
	"sync"
	"time"
	"unsafe"

	hclog "github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"

	"manent.dev/sdk/go/plugin"
	pb "manent.dev/sdk/go/proto/pluginv1"
)

// brokerSecrets reads secrets from the Secrets service the host brokers for one call. The host
// announces the service when the call starts and go-plugin forgets an announcement nobody
// dialed within 5 seconds, so the connection is opened at once, not at the first Secret.
type brokerSecrets struct {
	ready chan struct{}
	conn  *grpc.ClientConn
	err   error

	mu     sync.Mutex
	closed bool
}

func openSecrets(b *goplugin.GRPCBroker, id uint32) *brokerSecrets {
	s := &brokerSecrets{ready: make(chan struct{})}
	go func() {
		conn, err := b.Dial(id)
		s.mu.Lock()
		s.conn, s.err = conn, err
		if s.closed && conn != nil {
			go closeQuietly(conn)
		}
		s.mu.Unlock()
		close(s.ready)
	}()
	return s
}

// close ends the call's access; a Secret after it is refused.
func (s *brokerSecrets) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.conn != nil {
		go closeQuietly(s.conn)
	}
}

// closeQuietly closes a connection once its handshake has ended (at most 2 seconds), so that
// the host does not log a TLS handshake cut short for a call that read no secret.
func closeQuietly(conn *grpc.ClientConn) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for st := conn.GetState(); st == connectivity.Idle || st == connectivity.Connecting; st = conn.GetState() {
		if !conn.WaitForStateChange(ctx, st) {
			break
		}
	}
	conn.Close()
}

func (s *brokerSecrets) Secret(ctx context.Context, name string) (string, error) {
	select {
	case <-s.ready:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	s.mu.Lock()
	conn, err, closed := s.conn, s.err, s.closed
	s.mu.Unlock()
	if closed {
		return "", plugin.Permanent(fmt.Errorf("secret %s: the call it was granted to has returned", name))
	}
	if err != nil {
		return "", fmt.Errorf("secret %s: cannot reach the host's secrets service: %w", name, err)
	}
	resp, err := pb.NewSecretsClient(conn).Secret(ctx, &pb.SecretRequest{Name: name})
	if err != nil {
		st, _ := status.FromError(err)
		if st.Code() == codes.PermissionDenied {
			return "", plugin.Permanent(fmt.Errorf("secret %s: %s", name, st.Message()))
		}
		if st.Code() == codes.Canceled || st.Code() == codes.DeadlineExceeded {
			return "", fmt.Errorf("secret %s: %w", name, ctx.Err())
		}
		return "", fmt.Errorf("secret %s: %s", name, st.Message())
	}
	return resp.Value, nil
}

// fixBrokerTLS repairs go-plugin < 1.4.4's broker dial under AutoMTLS (go-plugin #109): the
// broker dials with the server's own tls.Config, which has no RootCAs and no ServerName, so
// verifying the host's certificate fails ("valid for localhost, not unused"). When that
// configuration has no RootCAs, they become the host's certificate (PLUGIN_CLIENT_CERT) and
// ServerName "localhost". From 1.4.4 on go-plugin sets both itself and this does nothing.
// The configuration is an unexported field: only reflection reaches it.
func fixBrokerTLS(b *goplugin.GRPCBroker, log hclog.Logger) {
	if b == nil {
		return
	}
	v := reflect.ValueOf(b).Elem()
	f := v.FieldByName("tls")
	if !f.IsValid() || f.Type() != reflect.TypeOf((*tls.Config)(nil)) {
		log.Trace("go-plugin broker has no tls field; leaving it as it is")
		return
	}
	cfg := *(**tls.Config)(unsafe.Pointer(f.UnsafeAddr()))
	if cfg == nil || cfg.RootCAs != nil {
		return
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(os.Getenv("PLUGIN_CLIENT_CERT"))) {
		log.Warn("PLUGIN_CLIENT_CERT is not a PEM certificate: secrets cannot be read")
		return
	}
	cfg.RootCAs = pool
	if cfg.ServerName == "" {
		cfg.ServerName = "localhost"
	}
}
