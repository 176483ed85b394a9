// Command systemd-unit is an example manent plugin written with the Go SDK: it installs one
// file (a binary, a unit's payload) and restarts a systemd unit.
//
// Options (in manent.yml, beside `external:`):
//
//	dir: /opt/app               where the file goes ({target} is replaced by the target's name)
//	file: app                   its name there (default: the artifact file's name)
//	restart: [systemctl, restart, app.service]   run after a change (argv; {target} replaced)
//	health: [systemctl, is-active, app.service]  run after the restart; must exit 0
//
// The artifact is a local file: artifact.uri file:///path/to/app (and artifact.sha256, when
// given, is checked). A deploy is idempotent: when the file in place has the same sha256 and
// the VERSION file written next to it names the same version, the target is unchanged and
// nothing is restarted. DryRun says what a deploy would do; CurrentRelease reads VERSION.
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	hclog "github.com/hashicorp/go-hclog"

	"manent.dev/sdk/go/external"
	"manent.dev/sdk/go/plugin"
)

func main() { external.Serve(New) }

// Options are the plugin's options from manent.yml.
type Options struct {
	Dir     string   `json:"dir"`
	File    string   `json:"file"`
	Restart []string `json:"restart"`
	Health  []string `json:"health"`
}

// Unit deploys a file and restarts a unit.
type Unit struct {
	opt Options
	log hclog.Logger
}

// New is the plugin's factory.
func New(config json.RawMessage, log hclog.Logger) (plugin.Deployer, error) {
	var o Options
	dec := json.NewDecoder(bytes.NewReader(config))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil {
		return nil, fmt.Errorf("systemd-unit options: %w", err)
	}
	if o.Dir == "" {
		return nil, errors.New("systemd-unit options: `dir` is required")
	}
	return &Unit{opt: o, log: log}, nil
}

func (u *Unit) dir(t plugin.Target) string {
	return strings.ReplaceAll(u.opt.Dir, "{target}", t.Name())
}

func argv(args []string, t plugin.Target) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = strings.ReplaceAll(a, "{target}", t.Name())
	}
	return out
}

// source is the artifact's local path.
func source(a plugin.Artifact) (string, error) {
	u, err := url.Parse(a.URI)
	if err != nil || u.Scheme != "file" || u.Path == "" {
		return "", plugin.Permanent(fmt.Errorf("artifact.uri %q: a file:///path is required", a.URI))
	}
	return u.Path, nil
}

func (u *Unit) fileName(src string) string {
	if u.opt.File != "" {
		return u.opt.File
	}
	return filepath.Base(src)
}

func sha256File(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func readVersion(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, "VERSION"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// Validate checks the artifact before anything is touched.
func (u *Unit) Validate(ctx context.Context, req *plugin.Request) error {
	src, err := source(req.Artifact)
	if err != nil {
		return err
	}
	sum, err := sha256File(src)
	if err != nil {
		return plugin.Permanent(fmt.Errorf("artifact: %w", err))
	}
	if want := req.Artifact.SHA256; want != "" && !strings.EqualFold(want, sum) {
		return plugin.Permanent(fmt.Errorf("artifact %s: sha256 %s, the descriptor says %s", src, sum, want))
	}
	return nil
}

// plan tells whether a target already has the artifact.
func (u *Unit) plan(req *plugin.Request, t plugin.Target) (src, dest, sum string, same bool, err error) {
	if src, err = source(req.Artifact); err != nil {
		return
	}
	if sum, err = sha256File(src); err != nil {
		err = plugin.Permanent(fmt.Errorf("artifact: %w", err))
		return
	}
	dest = filepath.Join(u.dir(t), u.fileName(src))
	have, herr := sha256File(dest)
	same = herr == nil && have == sum && readVersion(u.dir(t)) == req.Artifact.Version
	return
}

// Deploy installs the file on each target, restarts the unit and checks its health.
func (u *Unit) Deploy(ctx context.Context, req *plugin.Request) (*plugin.Result, error) {
	res := &plugin.Result{}
	for _, t := range req.Targets {
		began := time.Now()
		src, dest, sum, same, err := u.plan(req, t)
		if err != nil {
			return nil, err
		}
		if same {
			req.TargetLog(t).Info("already in place", "file", dest, "sha256", sum)
			res.Targets = append(res.Targets, plugin.TargetResult{Host: t.Host, Status: plugin.StatusUnchanged,
				Message: fmt.Sprintf("%s %s already in place", dest, req.Artifact.Version), Duration: time.Since(began)})
			continue
		}
		// VERSION goes before the file changes and comes back only once the unit is healthy:
		// a retry after a failed restart or health check (of this release or of one deployed
		// over it) never finds file and VERSION agreeing, and restarts and checks again
		// instead of saying "unchanged".
		if err := os.Remove(filepath.Join(u.dir(t), "VERSION")); err != nil && !os.IsNotExist(err) {
			return nil, fmt.Errorf("%s: %w", t.Name(), err)
		}
		if err := install(src, dest); err != nil {
			return nil, fmt.Errorf("%s: %w", t.Name(), err)
		}
		req.TargetLog(t).Info("installed", "file", dest, "sha256", sum, "version", req.Artifact.Version)
		if err := u.run(ctx, req, "restart", argv(u.opt.Restart, t), t); err != nil {
			return nil, err
		}
		if err := u.run(ctx, req, "health", argv(u.opt.Health, t), t); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(u.dir(t), "VERSION"), []byte(req.Artifact.Version+"\n"), 0o644); err != nil {
			return nil, fmt.Errorf("%s: %w", t.Name(), err)
		}
		res.Targets = append(res.Targets, plugin.TargetResult{Host: t.Host, Status: plugin.StatusDeployed,
			Message: fmt.Sprintf("%s %s installed", dest, req.Artifact.Version), Duration: time.Since(began)})
	}
	return res, nil
}

// install copies src to dest through a temporary file in the same directory and a rename, so
// the unit never sees half a file.
func install(src, dest string) error {
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	mode := os.FileMode(0o644)
	if st, err := in.Stat(); err == nil {
		mode = st.Mode().Perm()
	}
	tmp, err := os.CreateTemp(filepath.Dir(dest), "."+filepath.Base(dest)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, in); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dest)
}

// run runs a configured command; its output goes to the log, a failure is retryable.
func (u *Unit) run(ctx context.Context, req *plugin.Request, what string, args []string, t plugin.Target) error {
	if len(args) == 0 {
		return nil
	}
	out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
	if len(out) > 0 {
		req.TargetLog(t).Debug(what+" output", "output", strings.TrimSpace(string(out)))
	}
	if err != nil {
		return fmt.Errorf("%s: %s %s: %w", t.Name(), what, strings.Join(args, " "), err)
	}
	return nil
}

// DryRun says what Deploy would do.
func (u *Unit) DryRun(ctx context.Context, req *plugin.Request) (*plugin.Result, error) {
	res := &plugin.Result{}
	for _, t := range req.Targets {
		_, dest, _, same, err := u.plan(req, t)
		if err != nil {
			return nil, err
		}
		msg := fmt.Sprintf("would install %s %s", dest, req.Artifact.Version)
		if len(u.opt.Restart) > 0 {
			msg += " and run " + strings.Join(argv(u.opt.Restart, t), " ")
		}
		if same {
			msg = fmt.Sprintf("%s %s already in place", dest, req.Artifact.Version)
		}
		res.Targets = append(res.Targets, plugin.TargetResult{Host: t.Host, Status: plugin.StatusUnchanged, Message: msg})
	}
	return res, nil
}

// CurrentRelease reads the VERSION file of each target.
func (u *Unit) CurrentRelease(ctx context.Context, req *plugin.Request) ([]plugin.TargetRelease, error) {
	var out []plugin.TargetRelease
	for _, t := range req.Targets {
		out = append(out, plugin.TargetRelease{Host: t.Host, Version: readVersion(u.dir(t))})
	}
	return out, nil
}
