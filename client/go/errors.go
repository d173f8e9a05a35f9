package dlock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// The kinds of failure, matched with errors.Is. Every error the package
// returns for a call is an *Error whose Kind is one of these.
var (
	// ErrBusy: another owner holds a live lease (TryAcquire), or the wait ran out (55P03).
	ErrBusy = errors.New("dlock: lock is busy")
	// ErrStaleToken: a fenced write with a token below the highest accepted (PD001).
	ErrStaleToken = errors.New("dlock: stale fencing token")
	// ErrNotHeld: the token is not the live lease of the lock (PD002).
	ErrNotHeld = errors.New("dlock: lock not held")
	// ErrInvalidArgument: the server refused an argument (22023, 22004, PD020).
	ErrInvalidArgument = errors.New("dlock: invalid argument")
	// ErrPermission: the role lacks a grant (42501).
	ErrPermission = errors.New("dlock: permission denied")
	// ErrUnknownOutcome: the call may or may not have taken effect (the
	// connection broke while it was in flight, 08xxx, 57P01-57P03, 40003, a
	// commit whose synchronous replication wait was canceled).
	ErrUnknownOutcome = errors.New("dlock: outcome unknown")
	// ErrConnection: could not connect; nothing was sent.
	ErrConnection = errors.New("dlock: could not connect")
	// ErrServer: any other server error (its SQLSTATE is in Error.SQLState).
	ErrServer = errors.New("dlock: server error")
	// ErrLost: the lease was lost (a renewal refused, or its deadline passed
	// without a confirmed renewal).
	ErrLost = errors.New("dlock: lease lost")
)

// Error is a failed call: Kind says which (errors.Is(err, ErrBusy)), Subject
// names the lock or resource, SQLState is the server's code when there is
// one, OwnerToken is set for an acquire whose outcome is unknown (retry with
// it to resolve), and Err is the underlying error (errors.As reaches the
// *pgconn.PgError).
type Error struct {
	Kind       error
	Subject    string
	SQLState   string
	OwnerToken string
	Message    string
	Err        error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Kind.Error())
	if e.Subject != "" {
		fmt.Fprintf(&b, " (%q)", e.Subject)
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	return b.String()
}

// Is matches the Kind.
func (e *Error) Is(target error) bool { return target == e.Kind }

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// unknownSQLState: the statement may or may not have taken effect.
func unknownSQLState(state string) bool {
	return strings.HasPrefix(state, "08") || state == "57P01" || state == "57P02" || state == "57P03" ||
		state == "40003"
}

// kindOf is the one mapping of SQLSTATEs to kinds.
func kindOf(state string) error {
	switch {
	case unknownSQLState(state):
		return ErrUnknownOutcome
	case state == "PD001" || state == "DL001":
		return ErrStaleToken
	case state == "PD002" || state == "DL002":
		return ErrNotHeld
	case state == "55P03":
		return ErrBusy
	case state == "22023" || state == "22004" || state == "PD020":
		return ErrInvalidArgument
	case state == "42501":
		return ErrPermission
	default:
		return ErrServer
	}
}

// mapError turns a failure of a call on subject into an *Error. A failure
// that is not a server's answer (a broken connection, a timeout while the
// call was in flight) is an unknown outcome unless pgconn knows nothing was
// sent.
func mapError(err error, subject, ownerToken string) *Error {
	var de *Error
	if errors.As(err, &de) {
		return de
	}
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		e := &Error{Kind: kindOf(pg.Code), Subject: subject, SQLState: pg.Code, Message: pg.Message, Err: err}
		if e.Kind == ErrUnknownOutcome {
			e.OwnerToken = ownerToken
		}
		return e
	}
	if isUnknown(err) {
		return &Error{Kind: ErrUnknownOutcome, Subject: subject, OwnerToken: ownerToken, Message: err.Error(), Err: err}
	}
	return &Error{Kind: ErrServer, Subject: subject, Message: err.Error(), Err: err}
}

// isUnknown: err leaves the call's outcome unknown.
func isUnknown(err error) bool {
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		return unknownSQLState(pg.Code)
	}
	var de *Error
	if errors.As(err, &de) {
		return de.Kind == ErrUnknownOutcome
	}
	if pgconn.SafeToRetry(err) {
		return false
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || pgconn.Timeout(err) ||
		strings.Contains(err.Error(), "conn closed") || strings.Contains(err.Error(), "connection")
}

// nothingSent: err happened before anything was sent (safe to try again).
func nothingSent(err error) bool {
	var de *Error
	if errors.As(err, &de) {
		return de.Kind == ErrConnection
	}
	return pgconn.SafeToRetry(err)
}
