module manent.dev/sdk/go

go 1.19

require (
	github.com/golang/protobuf v1.5.3
	github.com/hashicorp/go-hclog v1.5.0
	github.com/hashicorp/go-plugin v1.4.10
	google.golang.org/grpc v1.56.3
)
