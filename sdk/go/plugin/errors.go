package plugin

import "errors"

// PermanentError marks an error that retrying cannot fix: manent fails the target at once
// instead of retrying it (on the wire: gRPC ABORTED). Any other error is retryable (UNKNOWN),
// and an error that already is a gRPC status keeps its code.
type PermanentError struct {
	Err error
}

func (e *PermanentError) Error() string {
	if e.Err == nil {
		return "permanent failure"
	}
	return e.Err.Error()
}

// Unwrap returns the wrapped error.
func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent marks err as permanent (nil stays nil). errors.Is/As see through it.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	var p *PermanentError
	if errors.As(err, &p) {
		return err
	}
	return &PermanentError{Err: err}
}

// IsPermanent tells whether err (or an error it wraps) was marked with Permanent.
func IsPermanent(err error) bool {
	var p *PermanentError
	return errors.As(err, &p)
}
