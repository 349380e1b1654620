// Package slicewrite writes the difference between an existing and a desired set of objects
// (EndpointSlices in practice) in the one order that never leaves readers with fewer
// endpoints than either set holds: creates first, then updates, then deletes. Writes of one
// kind go out together, so a sync that touches many slices waits about one round trip per kind
// instead of one per slice. Every controller that owns a slice set writes it through Apply, so
// they all fail the same way.
package slicewrite

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Op is one kind of write.
type Op string

// The writes Apply makes, in the order it makes them.
const (
	Create Op = "create"
	Update Op = "update"
	Delete Op = "delete"
)

// Changes are the writes that turn an existing set into a desired one. Update objects carry
// the existing object's resourceVersion; Delete objects are the existing objects (their UID,
// when set, becomes a precondition, so a same-named successor is never deleted by mistake).
// A Create may reuse the name of a Delete when an immutable field changed.
type Changes[T client.Object] struct {
	Create, Update, Delete []T
}

// Observer is told the outcome of each write once it is known, and how long its request took:
// err is nil on success, and a delete of an object that is already gone is a success. Use it
// to count and track writes. Apply never calls it from two writes at once.
type Observer[T client.Object] func(op Op, obj T, took time.Duration, err error)

// MaxInFlight is the most writes of one kind Apply has in flight at once.
const MaxInFlight = 8

// SerialWriter is a client that asks for its writes one at a time, in list order: an in-memory
// store, say, whose writes cost no round trip, so that side-by-side writes would buy nothing and
// only make the order in which it names and versions objects vary from run to run.
type SerialWriter interface {
	client.Writer
	WritesOneAtATime() bool
}

// Error is the first write that failed (in the order of its kind's list); Apply started no
// write of a later kind, and no more of its own.
type Error struct {
	Op  Op
	Key types.NamespacedName
	Err error
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s %s: %v", e.Op, e.Key, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Apply writes changes with c: creates, then updates, then deletes, then the creates that
// replace a deleted object of the same name (which cannot exist side by side), each kind's writes
// at once (up to MaxInFlight; one at a time for a SerialWriter that asks) and the next kind only
// once all of them landed. It stops at the
// first failure, because deleting objects whose replacements could not be written would drop
// endpoints; the caller's retry plans again from what did land. observe may be nil.
func Apply[T client.Object](ctx context.Context, c client.Writer, changes Changes[T], observe Observer[T]) error {
	var mu sync.Mutex
	serialized := func(op Op, obj T, took time.Duration, err error) {
		if observe != nil {
			mu.Lock()
			defer mu.Unlock()
			observe(op, obj, took, err)
		}
	}
	inFlight := MaxInFlight
	if sw, ok := c.(SerialWriter); ok && sw.WritesOneAtATime() {
		inFlight = 1
	}
	deleting := make(map[types.NamespacedName]bool, len(changes.Delete))
	for _, obj := range changes.Delete {
		deleting[client.ObjectKeyFromObject(obj)] = true
	}
	var creates, replacements []T
	for _, obj := range changes.Create {
		if deleting[client.ObjectKeyFromObject(obj)] {
			replacements = append(replacements, obj)
		} else {
			creates = append(creates, obj)
		}
	}
	for _, group := range []struct {
		op   Op
		objs []T
	}{{Create, creates}, {Update, changes.Update}, {Delete, changes.Delete}, {Create, replacements}} {
		if err := writeAll(ctx, c, group.op, group.objs, inFlight, serialized); err != nil {
			return err
		}
	}
	return nil
}

// writeAll makes the writes of one kind at once, at most inFlight in flight, and returns the
// first failure in list order; once one failed it starts no more.
func writeAll[T client.Object](ctx context.Context, c client.Writer, op Op, objs []T, inFlight int, observe Observer[T]) error {
	if len(objs) == 1 || inFlight == 1 {
		for _, obj := range objs {
			if err := write(ctx, c, op, obj, observe); err != nil {
				return err
			}
		}
		return nil
	}
	errs := make([]error, len(objs))
	slots := make(chan struct{}, inFlight)
	var (
		wg     sync.WaitGroup
		failed atomic.Bool
	)
	for i, obj := range objs {
		slots <- struct{}{}
		if failed.Load() {
			<-slots
			break
		}
		wg.Go(func() {
			defer func() { <-slots }()
			if errs[i] = write(ctx, c, op, obj, observe); errs[i] != nil {
				failed.Store(true)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func write[T client.Object](ctx context.Context, c client.Writer, op Op, obj T, observe Observer[T]) error {
	start := time.Now()
	var err error
	switch op {
	case Create:
		err = c.Create(ctx, obj)
	case Update:
		err = c.Update(ctx, obj)
	case Delete:
		var opts []client.DeleteOption
		if uid := obj.GetUID(); uid != "" {
			opts = append(opts, client.Preconditions{UID: &uid})
		}
		err = client.IgnoreNotFound(c.Delete(ctx, obj, opts...))
	}
	observe(op, obj, time.Since(start), err)
	if err != nil {
		return &Error{Op: op, Key: client.ObjectKeyFromObject(obj), Err: err}
	}
	return nil
}
