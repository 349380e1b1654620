package placement

import (
	"cmp"
	"fmt"
	"slices"

	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/fleetslice/fleetslice/controllers/endpointslice/endpoints"
)

// MaxEndpointsPerSliceLimit is the most endpoints the API server accepts in
// one EndpointSlice.
const MaxEndpointsPerSliceLimit = 1000

// Defaults of the manager's flags for Input.MaxPerSlice and Input.Slack: upstream's slice size,
// and one slice of slack. They live here, beside what they tune, so that tools showing the
// manager's settings (internal/ops/explain) read them without linking the reconciler.
const (
	DefaultMaxEndpointsPerSlice = 100
	DefaultCompactionSlack      = 1
)

// Input is one slice set: the slices it has and the endpoints it should have.
type Input struct {
	// Existing are the set's slices, all managed by this controller. Slices
	// that cannot belong to the set (another address type or port list, no
	// name, a name listed twice, already being deleted) are left alone and
	// reported in Result.Ignored.
	Existing []*discoveryv1.EndpointSlice
	// Desired are the endpoints the set must list. An endpoint without
	// addresses, or a second endpoint with the same endpoints.Identity, is
	// dropped and counted in Stats.
	Desired     []discoveryv1.Endpoint
	AddressType discoveryv1.AddressType
	// Ports are the set's ports (order does not matter); new slices get a
	// copy of them.
	Ports []discoveryv1.EndpointPort
	// MaxPerSlice is the most endpoints one slice may hold, 1..1000.
	MaxPerSlice int
	// Slack is how many slices above ceil(n/MaxPerSlice) the set may have
	// before compaction merges slices, >= 0.
	Slack int
	// NeedsUpdate, if set, reports slices that must be rewritten even when
	// their endpoints are right (stale labels, for example).
	NeedsUpdate func(*discoveryv1.EndpointSlice) bool
	// Hints is this sync's topology decision: an endpoint listed here ends
	// with exactly these hints (nil: none), and a slice whose hints change is
	// written like any other changed slice, so new endpoints go there first.
	// An endpoint not listed keeps the hints it has, or brings those of its
	// Desired value when it is new. Hints is read, never modified.
	Hints map[endpoints.Identity]*discoveryv1.EndpointHints
}

// Result is what to write. Applying Create, then Update, then Delete brings
// the set to the desired state.
type Result struct {
	// Create are new slices with AddressType, Ports and Endpoints set and no
	// metadata: the caller adds labels, owner and generateName.
	Create []*discoveryv1.EndpointSlice
	// Update are modified deep copies of existing slices, sorted by name.
	Update []*discoveryv1.EndpointSlice
	// Delete are existing slices (the input objects), sorted by name.
	Delete []*discoveryv1.EndpointSlice
	// Stats describes the change, for metrics, logs and tests.
	Stats Stats
	// Compacted names the existing slices that compaction merged away (their
	// names may have been reused by an update).
	Compacted []string
	// Trimmed names the existing slices that held more than MaxPerSlice
	// endpoints and gave the excess to other slices.
	Trimmed []string
	// Ignored lists existing slices Plan did not consider part of the set.
	Ignored []Ignored
	// Err is set, and nothing is to be written, when Input is invalid.
	Err error
}

// Writes returns the number of API writes the result asks for.
func (r Result) Writes() int { return len(r.Create) + len(r.Update) + len(r.Delete) }

// Stats counts endpoints by what happened to them.
type Stats struct {
	// Desired is the number of distinct valid desired endpoints.
	Desired int
	// Added endpoints were in no existing slice.
	Added int
	// Removed endpoints were listed in an existing slice but are no longer
	// desired, or were a second copy of one endpoint.
	Removed int
	// Changed endpoints stayed in their slice with new content.
	Changed int
	// Rehinted endpoints stayed in their slice with their content unchanged
	// and only new hints (from Input.Hints).
	Rehinted int
	// Moved endpoints were listed in an existing slice and now live in a
	// different one (compaction or trimming; nothing else moves endpoints).
	Moved int
	// InvalidDesired desired endpoints had no addresses.
	InvalidDesired int
	// DuplicateDesired desired endpoints repeated an earlier one's identity.
	DuplicateDesired int
}

// Ignored is an existing slice left alone, and why.
type Ignored struct {
	Name   string
	Reason string
}

// Plan computes the writes that bring one slice set from in.Existing to
// in.Desired; see the package documentation for the algorithm. It never
// modifies its input, and its output never aliases the input except for the
// slices listed in Delete. The same input always gives the same output.
//
// With no desired endpoints Plan deletes every slice of the set; keeping one
// placeholder slice per address type is the caller's decision.
func Plan(in Input) Result {
	if in.MaxPerSlice < 1 || in.MaxPerSlice > MaxEndpointsPerSliceLimit {
		return Result{Err: fmt.Errorf("max endpoints per slice must be 1..%d, got %d", MaxEndpointsPerSliceLimit, in.MaxPerSlice)}
	}
	if in.Slack < 0 {
		return Result{Err: fmt.Errorf("compaction slack must not be negative, got %d", in.Slack)}
	}
	p := newPlanner(in)
	p.reuseExisting()
	p.placeNew()
	p.compact()
	return p.build()
}

// entry is one endpoint in a slot: the value to write and which desired
// endpoint it is.
type entry struct {
	ep      *discoveryv1.Endpoint
	desired int32
}

// slot is a slice of the planned layout: an existing slice or one to create.
type slot struct {
	existing *discoveryv1.EndpointSlice // nil: to be created
	entries  []entry
	// kept is how many entries were already in this slice.
	kept int
	// dirty: the slice must be written even if nothing else changes.
	dirty bool
	// gone: the slice will be deleted (existing) or not created (new).
	gone bool
	// seq orders slots deterministically: existing by name, then new ones
	// in the order they were opened.
	seq int
}

func (s *slot) name() string {
	if s.existing == nil {
		return ""
	}
	return s.existing.Name
}

func (s *slot) room(limit int) int { return limit - len(s.entries) }

type planner struct {
	in  Input
	max int
	// index maps a desired endpoint's identity to its index in in.Desired
	// (the first valid occurrence).
	index map[endpoints.Identity]int32
	// order lists the indexes in index, in input order.
	order []int32
	// origin is, per desired index, the slot it was found in (-1: new).
	origin []int32
	slots  []*slot
	pool   []entry
	result Result
	// moved counts endpoints written into a slice other than their origin.
	moved int
}

func newPlanner(in Input) *planner {
	p := &planner{
		in:     in,
		max:    in.MaxPerSlice,
		index:  make(map[endpoints.Identity]int32, len(in.Desired)),
		origin: make([]int32, len(in.Desired)),
	}
	for i := range in.Desired {
		p.origin[i] = -1
		ep := &in.Desired[i]
		if len(ep.Addresses) == 0 {
			p.result.Stats.InvalidDesired++
			continue
		}
		id := endpoints.IdentityOf(ep)
		if _, dup := p.index[id]; dup {
			p.result.Stats.DuplicateDesired++
			continue
		}
		p.index[id] = int32(i)
		p.order = append(p.order, int32(i))
	}
	p.result.Stats.Desired = len(p.order)
	p.adoptExisting()
	return p
}

// adoptExisting turns the slices that belong to the set into slots, in name
// order, and reports the rest.
func (p *planner) adoptExisting() {
	own := make([]*discoveryv1.EndpointSlice, 0, len(p.in.Existing))
	for _, s := range p.in.Existing {
		if s == nil {
			continue
		}
		reason := ""
		switch {
		case s.Name == "":
			reason = "slice has no name"
		case s.DeletionTimestamp != nil:
			reason = "slice is being deleted"
		case s.AddressType != p.in.AddressType:
			reason = fmt.Sprintf("address type %s is not the set's %s", s.AddressType, p.in.AddressType)
		case !endpoints.PortsEqual(s.Ports, p.in.Ports):
			reason = "ports differ from the set's"
		}
		if reason != "" {
			p.result.Ignored = append(p.result.Ignored, Ignored{Name: s.Name, Reason: reason})
			continue
		}
		own = append(own, s)
	}
	slices.SortStableFunc(own, func(a, b *discoveryv1.EndpointSlice) int { return cmp.Compare(a.Name, b.Name) })
	for i, s := range own {
		if i > 0 && own[i-1].Name == s.Name {
			p.result.Ignored = append(p.result.Ignored, Ignored{Name: s.Name, Reason: "another slice has the same name"})
			continue
		}
		p.slots = append(p.slots, &slot{existing: s, seq: len(p.slots)})
	}
}

// newSlot opens a slice to create.
func (p *planner) newSlot() *slot {
	s := &slot{dirty: true, seq: len(p.slots)}
	p.slots = append(p.slots, s)
	return s
}

// fill moves entries from the front of *from into s until s is full or
// *from is empty, and reports whether it moved any.
func (p *planner) fill(s *slot, from *[]entry) bool {
	n := min(s.room(p.max), len(*from))
	if n <= 0 {
		return false
	}
	s.entries = append(s.entries, (*from)[:n]...)
	*from = (*from)[n:]
	return true
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
