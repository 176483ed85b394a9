package main

import (
	"context"
	"testing"

	hclog "github.com/hashicorp/go-hclog"

	"manent.dev/sdk/go/plugin"
)

func TestDeployIsNotImplementedYet(t *testing.T) {
	d, err := factory(nil, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.Deploy(context.Background(), &plugin.Request{})
	if !plugin.IsPermanent(err) {
		t.Fatalf("want a permanent error, got %v", err)
	}
}
