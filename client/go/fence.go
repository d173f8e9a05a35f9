package dlock

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Querier is the caller's transaction (pgx.Tx) or connection: fencing runs in
// the transaction that writes the business data, so both commit or neither.
type Querier interface {
	Exec(ctx context.Context, sql string, arguments ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Fence records token as the highest accepted for resource, in q's
// transaction; ErrStaleToken (PD001) when a higher one was accepted. The
// statement is unnamed, so it also works behind a transaction pooler.
func Fence(ctx context.Context, q Querier, resource string, token int64) error {
	_, err := q.Exec(ctx, "SELECT dlock.fence($1, $2)", pgx.QueryExecModeExec, resource, token)
	if err != nil {
		return mapError(err, resource, "")
	}
	return nil
}

// AssertHolds pins the lease until q's transaction ends; ErrNotHeld (PD002)
// when token is not the live lease of name.
func AssertHolds(ctx context.Context, q Querier, name string, token int64) error {
	_, err := q.Exec(ctx, "SELECT dlock.assert_holds($1, $2)", pgx.QueryExecModeExec, name, token)
	if err != nil {
		return mapError(err, name, "")
	}
	return nil
}

// Holds reports whether token is the live lease of name, and pins it then.
func Holds(ctx context.Context, q Querier, name string, token int64) (bool, error) {
	var held bool
	if err := q.QueryRow(ctx, "SELECT dlock.holds($1, $2)", pgx.QueryExecModeExec, name, token).Scan(&held); err != nil {
		return false, mapError(err, name, "")
	}
	return held, nil
}

// Commit commits tx: Done, or Unknown when the connection broke during the
// COMMIT (it may or may not have committed); other errors are returned.
func Commit(ctx context.Context, tx pgx.Tx) (Outcome, error) {
	if err := tx.Commit(ctx); err != nil {
		if isUnknown(err) {
			return Unknown, mapError(err, "", "")
		}
		return Refused, mapError(err, "", "")
	}
	return Done, nil
}
