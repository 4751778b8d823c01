package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Group commit (SQLite). Every answered write must survive a power cut, so
// SQLite runs with synchronous=FULL: a commit waits for its fsync. One
// fsync per request would halve the bookings a second, so write
// transactions go through one goroutine that commits the ones that arrive
// together as one SQLite transaction — one fsync for all of them — each
// inside a savepoint of its own, so that each stays all or nothing: one
// that fails is rolled back to its savepoint and the others commit. A
// request is answered only after the commit its work was in.

// maxGroup bounds how many transactions share one commit.
const maxGroup = 64

type groupTx struct {
	fn    func(*sql.Tx) error
	ctx   context.Context
	err   error
	panic any // a panic in fn, raised again in the caller's goroutine
	done  chan struct{}
}

type groupCommitter struct {
	db      *sql.DB
	pending chan *groupTx
	stop    chan struct{}
	stopped chan struct{}
}

func newGroupCommitter(db *sql.DB) *groupCommitter {
	g := &groupCommitter{db: db, pending: make(chan *groupTx), stop: make(chan struct{}), stopped: make(chan struct{})}
	go g.run()
	return g
}

// do runs fn in a write transaction shared with whatever else is being
// written at the moment, and returns once its work is durable (or not
// done at all).
func (g *groupCommitter) do(ctx context.Context, fn func(*sql.Tx) error) error {
	t := &groupTx{fn: fn, ctx: ctx, done: make(chan struct{})}
	select {
	case g.pending <- t:
	case <-ctx.Done():
		return ctx.Err()
	case <-g.stop:
		return errors.New("the database is closed")
	}
	<-t.done // not ctx: once taken, the work may commit, and the caller must know
	if t.panic != nil {
		panic(t.panic)
	}
	return t.err
}

func (g *groupCommitter) close() {
	close(g.stop)
	<-g.stopped
}

func (g *groupCommitter) run() {
	defer close(g.stopped)
	for {
		var first *groupTx
		select {
		case first = <-g.pending:
		case <-g.stop:
			return
		}
		batch := []*groupTx{first}
	gather:
		for len(batch) < maxGroup {
			select {
			case t := <-g.pending:
				batch = append(batch, t)
			default:
				break gather
			}
		}
		g.commit(batch)
		for _, t := range batch {
			close(t.done)
		}
	}
}

func (g *groupCommitter) commit(batch []*groupTx) {
	ctx := context.Background()
	tx, err := g.db.BeginTx(ctx, nil)
	if err != nil {
		for _, t := range batch {
			t.err = fmt.Errorf("begin: %w", err)
		}
		return
	}
	for _, t := range batch {
		if broken := runInSavepoint(ctx, tx, t); broken != nil {
			// The transaction itself is gone: nothing of the batch commits.
			_ = tx.Rollback()
			for _, t := range batch {
				if t.err == nil && t.panic == nil {
					t.err = fmt.Errorf("transaction rolled back: %w", broken)
				}
			}
			return
		}
	}
	if err := tx.Commit(); err != nil {
		for _, t := range batch {
			if t.err == nil && t.panic == nil {
				t.err = fmt.Errorf("commit: %w", err)
			}
		}
	}
}

// runInSavepoint runs one request's fn; its error (or panic) is kept for
// it, and what it wrote is undone. The result is non-nil only when the
// shared transaction cannot go on.
func runInSavepoint(ctx context.Context, tx *sql.Tx, t *groupTx) (broken error) {
	if err := t.ctx.Err(); err != nil {
		t.err = err
		return nil
	}
	if _, err := tx.ExecContext(ctx, `SAVEPOINT grouped`); err != nil {
		return err
	}
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.panic = p
			}
		}()
		t.err = t.fn(tx)
	}()
	if t.err != nil || t.panic != nil {
		if _, err := tx.ExecContext(ctx, `ROLLBACK TO SAVEPOINT grouped`); err != nil {
			return err
		}
	}
	_, err := tx.ExecContext(ctx, `RELEASE SAVEPOINT grouped`)
	return err
}
