package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"testing"
)

type base struct{}

func (base) Validate(context.Context, *Request) error                     { return nil }
func (base) Deploy(context.Context, *Request) (*Result, error)            { return &Result{}, nil }
func (base) DryRun(context.Context, *Request) (*Result, error)            { return nil, nil }
func (base) Rollback(context.Context, *Request, Release) (*Result, error) { return nil, nil }

type parallel struct {
	base
	yes bool
}

func (p parallel) ParallelTargets() bool { return p.yes }

type plain struct{}

func (plain) Validate(context.Context, *Request) error          { return nil }
func (plain) Deploy(context.Context, *Request) (*Result, error) { return nil, nil }

func TestCapabilitiesComeFromTheInterfacesImplementedSorted(t *testing.T) {
	if got := Capabilities(plain{}); len(got) != 0 {
		t.Fatalf("plain: %v", got)
	}
	if got, want := Capabilities(base{}), []string{"dry_run", "rollback"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if got, want := Capabilities(parallel{yes: true}), []string{"dry_run", "parallel_targets", "rollback"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if got, want := Capabilities(parallel{yes: false}), []string{"dry_run", "rollback"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("ParallelTargets false: got %v, want %v", got, want)
	}
}

func TestPermanentWrapsAndIsSeenThroughWrapping(t *testing.T) {
	if Permanent(nil) != nil {
		t.Fatal("Permanent(nil) must be nil")
	}
	err := Permanent(io.EOF)
	if !IsPermanent(err) || !errors.Is(err, io.EOF) || err.Error() != io.EOF.Error() {
		t.Fatalf("%v", err)
	}
	wrapped := fmt.Errorf("target t1: %w", err)
	if !IsPermanent(wrapped) {
		t.Fatal("a wrapped permanent error stays permanent")
	}
	var p *PermanentError
	if !errors.As(wrapped, &p) || p.Err != io.EOF {
		t.Fatal("errors.As finds the PermanentError")
	}
	if Permanent(err) != err {
		t.Fatal("Permanent is idempotent")
	}
	if IsPermanent(io.EOF) {
		t.Fatal("a plain error is retryable")
	}
}

func TestRequestHelpers(t *testing.T) {
	if n := (Target{Moniker: "prod::web::exec::t1"}).Name(); n != "t1" {
		t.Fatal(n)
	}
	if n := (Target{Moniker: "bare"}).Name(); n != "bare" {
		t.Fatal(n)
	}
	var p struct {
		A int `json:"a"`
	}
	r := &Request{Params: []byte(`{"a": 3}`)}
	if err := r.DecodeParams(&p); err != nil || p.A != 3 {
		t.Fatal(err, p)
	}
	if err := (&Request{}).DecodeParams(&p); err != nil {
		t.Fatal("no params decode as {}:", err)
	}
	if _, err := r.Secret(context.Background(), "x"); !errors.Is(err, ErrNoSecrets) || !IsPermanent(err) {
		t.Fatalf("a call without secrets: %v", err)
	}
	r.WithSecrets(StaticSecrets{"token": "v"})
	if v, err := r.Secret(context.Background(), "token"); err != nil || v != "v" {
		t.Fatal(v, err)
	}
	if _, err := r.Secret(context.Background(), "other"); !IsPermanent(err) {
		t.Fatal("an unknown secret is permanent")
	}
}
