// Package endpoints turns a Service, the Pods its selector matches and the
// cluster's Nodes into the desired content of the Service's EndpointSlices,
// grouped into slice sets.
//
// A slice set is every endpoint of one address type whose Pod resolves the
// Service's ports to the same port list. Placement (package placement) then
// decides which slice of a set each endpoint lives in; this package only says
// what must exist, never where.
//
// The semantics deliberately match the upstream EndpointSlice controller
// (k8s.io/endpointslice v0.37.2) so that fleetslice can replace it without
// any consumer noticing: same inclusion rules, same conditions, same port
// resolution, same address normalisation. Deviations exist only where
// upstream's behaviour on malformed input would write an invalid object;
// each one is marked "Deviation" where it is implemented.
//
// Everything here is pure: no clients, no clocks, no global state. Inputs are
// never mutated and outputs never alias inputs, so callers may modify the
// result freely.
package endpoints
