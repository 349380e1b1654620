// Package slicewrite writes the difference between an existing and a desired set of objects
// (EndpointSlices in practice) in the one order that never leaves readers with fewer
// endpoints than either set holds: creates first, then updates, then deletes. Every
// controller that owns a slice set writes it through Apply, so they all fail the same way.
package slicewrite

import (
	"context"
	"fmt"

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

// Observer is told the outcome of each write once it is known: err is nil on success, and a
// delete of an object that is already gone is a success. Use it to count and track writes.
type Observer[T client.Object] func(op Op, obj T, err error)

// Error is the first write that failed; Apply made none after it.
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
// replace a deleted object of the same name (which cannot exist side by side). It stops at
// the first failure, because deleting objects whose replacements could not be written would
// drop endpoints; the caller's retry plans again from what did land. observe may be nil.
func Apply[T client.Object](ctx context.Context, c client.Writer, changes Changes[T], observe Observer[T]) error {
	if observe == nil {
		observe = func(Op, T, error) {}
	}
	deleting := make(map[types.NamespacedName]bool, len(changes.Delete))
	for _, obj := range changes.Delete {
		deleting[client.ObjectKeyFromObject(obj)] = true
	}
	var replacements []T
	for _, obj := range changes.Create {
		if deleting[client.ObjectKeyFromObject(obj)] {
			replacements = append(replacements, obj)
			continue
		}
		if err := write(ctx, c, Create, obj, observe); err != nil {
			return err
		}
	}
	for _, obj := range changes.Update {
		if err := write(ctx, c, Update, obj, observe); err != nil {
			return err
		}
	}
	for _, obj := range changes.Delete {
		if err := write(ctx, c, Delete, obj, observe); err != nil {
			return err
		}
	}
	for _, obj := range replacements {
		if err := write(ctx, c, Create, obj, observe); err != nil {
			return err
		}
	}
	return nil
}

func write[T client.Object](ctx context.Context, c client.Writer, op Op, obj T, observe Observer[T]) error {
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
	observe(op, obj, err)
	if err != nil {
		return &Error{Op: op, Key: client.ObjectKeyFromObject(obj), Err: err}
	}
	return nil
}
