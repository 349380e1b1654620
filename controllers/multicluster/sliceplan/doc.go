// Package sliceplan decides, without client calls, which EndpointSlices the multi-cluster
// controllers keep: the copies a member publishes to the broker (one per local slice of an
// exported Service) and the imported slices every member materialises from those copies (one
// per source slice, so each imported slice has exactly one source cluster). Plan turns a
// desired set and the existing set into the creates, updates and deletes that reconcile them,
// writing nothing whose content is already right.
package sliceplan
