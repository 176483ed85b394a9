package external

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"manent.dev/sdk/go/plugin"
)

type grpcStatus interface {
	GRPCStatus() *status.Status
}

// toStatus maps a plugin's error to what the host sees: Permanent → ABORTED (not retried), a
// gRPC status error keeps its code, a context's end → CANCELLED / DEADLINE_EXCEEDED, anything
// else → UNKNOWN (retryable).
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if plugin.IsPermanent(err) {
		msg := err.Error()
		var se grpcStatus
		if errors.As(err, &se) && se.GRPCStatus() != nil {
			if s := se.GRPCStatus(); s.Code() == codes.Aborted || err.Error() == s.Err().Error() {
				msg = s.Message()
			}
		}
		return status.Error(codes.Aborted, msg)
	}
	// Only a status the plugin returned itself passes through: one wrapped inside another
	// error came from some other gRPC service the plugin called, and its code (ABORTED,
	// UNIMPLEMENTED, INVALID_ARGUMENT) says nothing about this call.
	if se, ok := err.(grpcStatus); ok && se.GRPCStatus() != nil {
		return se.GRPCStatus().Err()
	}
	switch {
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	return status.Error(codes.Unknown, err.Error())
}
