package placement

import (
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/fleetslice/fleetslice/controllers/endpointslice/endpoints"
)

// want describes a result: sizes of the slices created, names updated and
// deleted, and the layout of the set afterwards (Pod names per slice, new
// slices named gen-0001, ...). Unset fields are not checked.
type want struct {
	create []int
	update []string
	delete []string
	after  map[string][]string
	stats  *Stats
}

func TestPlanLazyRules(t *testing.T) {
	tests := []struct {
		name string
		in   Input
		want want
	}{{
		name: "nothing changed writes nothing",
		in:   input(10, 0, eps(0, 4), slice("a", eps(0, 4)...)),
		want: want{create: []int{}, update: []string{}, delete: []string{}},
	}, {
		name: "first sync fills new slices in desired order",
		in:   input(10, 0, eps(0, 25)),
		want: want{create: []int{10, 10, 5}, after: map[string][]string{
			"gen-0001": pods(0, 10), "gen-0002": pods(10, 20), "gen-0003": pods(20, 25)}},
	}, {
		name: "a removed endpoint updates only its slice",
		in:   input(10, 1, append(eps(0, 4), ep(5)), slice("a", eps(0, 3)...), slice("b", eps(3, 6)...)),
		want: want{update: []string{"b"}, after: map[string][]string{"a": pods(0, 3), "b": {"p3", "p5"}},
			stats: &Stats{Desired: 5, Removed: 1}},
	}, {
		name: "a slice left empty is deleted",
		in:   input(10, 1, eps(0, 2), slice("a", eps(0, 2)...), slice("b", eps(2, 4)...)),
		want: want{create: []int{}, update: []string{}, delete: []string{"b"}},
	}, {
		name: "a changed endpoint is replaced where it is",
		in:   input(10, 0, []discoveryv1.Endpoint{ep(0), notReadyEP(1), ep(2)}, slice("a", eps(0, 3)...)),
		want: want{update: []string{"a"}, after: map[string][]string{"a": pods(0, 3)},
			stats: &Stats{Desired: 3, Changed: 1}},
	}, {
		name: "new endpoints fill slices being updated, fullest first",
		in: input(10, 1, slices.Concat(eps(0, 5), eps(10, 18), eps(20, 25), eps(30, 33)),
			slice("a", eps(0, 7)...), slice("b", eps(10, 20)...), slice("c", eps(20, 25)...)),
		want: want{update: []string{"a", "b"}, after: map[string][]string{
			"a": {"p0", "p1", "p2", "p3", "p4", "p32"},
			"b": append(pods(10, 18), "p30", "p31"),
			"c": pods(20, 25)},
			stats: &Stats{Desired: 21, Added: 3, Removed: 4}},
	}, {
		name: "the rest goes into the untouched slice that ends closest to full",
		in: input(10, 1, slices.Concat(eps(0, 6), eps(10, 18), eps(20, 23), eps(30, 32)),
			slice("a", eps(0, 6)...), slice("b", eps(10, 18)...), slice("c", eps(20, 23)...)),
		want: want{update: []string{"b"}, after: map[string][]string{
			"a": pods(0, 6), "b": append(pods(10, 18), "p30", "p31"), "c": pods(20, 23)}},
	}, {
		name: "the rest gets a new slice when no untouched slice can take it all",
		in:   input(10, 1, slices.Concat(eps(0, 9), eps(10, 19), eps(30, 33)), slice("a", eps(0, 9)...), slice("b", eps(10, 19)...)),
		want: want{create: []int{3}, update: []string{}},
	}, {
		name: "full slices are created before the rest is fitted",
		in:   input(10, 1, slices.Concat(eps(0, 5), eps(30, 44)), slice("a", eps(0, 5)...)),
		want: want{create: []int{10}, update: []string{"a"}, after: map[string][]string{
			"a": append(pods(0, 5), pods(40, 44)...), "gen-0001": pods(30, 40)}},
	}, {
		name: "a new slice reuses the name of an emptied one",
		in:   input(4, 0, slices.Concat(eps(0, 4), eps(10, 13)), slice("a", eps(0, 4)...), slice("b", eps(4, 6)...)),
		want: want{create: []int{}, update: []string{"b"}, delete: []string{}, after: map[string][]string{
			"a": pods(0, 4), "b": pods(10, 13)}},
	}, {
		name: "an empty slice is filled before a slice is created",
		in:   input(10, 0, eps(0, 3), slice("empty")),
		want: want{create: []int{}, update: []string{"empty"}, after: map[string][]string{"empty": pods(0, 3)}},
	}, {
		name: "an empty slice nobody needs is deleted",
		in:   input(10, 5, eps(0, 2), slice("a", eps(0, 2)...), slice("empty")),
		want: want{update: []string{}, delete: []string{"empty"}},
	}, {
		name: "second copies of an endpoint are dropped",
		in:   input(10, 1, eps(0, 3), slice("a", eps(0, 2)...), slice("b", eps(1, 3)...)),
		want: want{update: []string{"b"}, after: map[string][]string{"a": pods(0, 2), "b": {"p2"}},
			stats: &Stats{Desired: 3, Removed: 1}},
	}, {
		name: "no desired endpoints deletes every slice",
		in:   input(10, 0, nil, slice("a", eps(0, 2)...), slice("b")),
		want: want{create: []int{}, update: []string{}, delete: []string{"a", "b"}},
	}, {
		name: "a slice over a lowered maximum gives its tail away",
		in:   input(4, 0, eps(0, 10), slice("a", eps(0, 10)...)),
		want: want{create: []int{4, 2}, update: []string{"a"}, after: map[string][]string{
			"a": pods(0, 4), "gen-0001": pods(4, 8), "gen-0002": pods(8, 10)},
			stats: &Stats{Desired: 10, Moved: 6}},
	}, {
		name: "a Pod reusing a deleted Pod's IP replaces it in the same slice",
		in: input(10, 0, []discoveryv1.Endpoint{ep(0), renamed(ep(1), "p1-new")},
			slice("a", eps(0, 2)...)),
		want: want{update: []string{"a"}, after: map[string][]string{"a": {"p0", "p1-new"}},
			stats: &Stats{Desired: 2, Added: 1, Removed: 1}},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(tc.in.Existing...)
			r := planAndCheck(t, c, tc.in)
			tc.want.check(t, r, c)
		})
	}
}

func (w want) check(t *testing.T, r Result, c *cluster) {
	t.Helper()
	if w.create != nil && !slices.Equal(sizes(r.Create), w.create) {
		t.Errorf("create sizes %v, want %v", sizes(r.Create), w.create)
	}
	if w.update != nil && !slices.Equal(names(r.Update), w.update) {
		t.Errorf("updates %v, want %v", names(r.Update), w.update)
	}
	if w.delete != nil && !slices.Equal(names(r.Delete), w.delete) {
		t.Errorf("deletes %v, want %v", names(r.Delete), w.delete)
	}
	if w.after != nil {
		if got := layout(c.list()); !reflect.DeepEqual(got, w.after) {
			t.Errorf("layout afterwards\n got %v\nwant %v", got, w.after)
		}
	}
	if w.stats != nil && r.Stats != *w.stats {
		t.Errorf("stats %+v, want %+v", r.Stats, *w.stats)
	}
}

func pods(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, ep(i).TargetRef.Name)
	}
	return out
}

func renamed(e discoveryv1.Endpoint, pod string) discoveryv1.Endpoint {
	e.TargetRef.Name, e.TargetRef.UID = pod, types.UID("uid-"+pod)
	return e
}

func TestPlanHints(t *testing.T) {
	existing := slice("a", hinted(ep(0), "zone-a"), hinted(ep(1), "zone-b"), ep(2))
	// Unchanged endpoints keep their hints and cost nothing, even when the
	// desired endpoint carries other hints: hints are not placement's.
	r := Plan(input(10, 0, []discoveryv1.Endpoint{ep(0), hinted(ep(1), "zone-c"), ep(2)}, existing))
	if r.Writes() != 0 {
		t.Fatalf("hint differences alone caused %d writes", r.Writes())
	}
	// A changed endpoint keeps its hints; a new endpoint brings its own.
	r = Plan(input(10, 0, []discoveryv1.Endpoint{notReadyEP(0), ep(1), ep(2), hinted(ep(3), "zone-z")}, existing))
	if len(r.Update) != 1 {
		t.Fatalf("updates %v, want a", names(r.Update))
	}
	got := r.Update[0].Endpoints
	if len(got) != 4 || *got[0].Conditions.Ready || got[0].Hints.ForZones[0].Name != "zone-a" ||
		got[1].Hints.ForZones[0].Name != "zone-b" || got[2].Hints != nil || got[3].Hints.ForZones[0].Name != "zone-z" {
		t.Errorf("endpoints after update: %v", got)
	}
}

func TestPlanNeedsUpdate(t *testing.T) {
	stale := func(s *discoveryv1.EndpointSlice) bool { return s.Labels["gen"] != "2" }
	a, b := slice("a", eps(0, 4)...), slice("b", eps(10, 18)...)
	b.Labels["gen"] = "2"
	in := input(10, 1, slices.Concat(eps(0, 4), eps(10, 18), eps(20, 22)), a, b)
	in.NeedsUpdate = stale
	r := Plan(in)
	// b would end closest to full, but a is written anyway and takes them.
	if !slices.Equal(names(r.Update), []string{"a"}) || len(r.Update[0].Endpoints) != 6 || len(r.Create) != 0 {
		t.Errorf("updates %v sizes %v creates %v, want a with 6", names(r.Update), sizes(r.Update), sizes(r.Create))
	}
	// NeedsUpdate alone is a write.
	in.Desired = slices.Concat(eps(0, 4), eps(10, 18))
	if r := Plan(in); !slices.Equal(names(r.Update), []string{"a"}) {
		t.Errorf("updates %v, want a", names(r.Update))
	}
}

func TestPlanIgnoresSlicesOfOtherSets(t *testing.T) {
	otherPorts := slice("other-ports", ep(0))
	otherPorts.Ports[0].Port = ptr.To[int32](9090)
	otherType := slice("other-type", ep(1))
	otherType.AddressType = discoveryv1.AddressTypeIPv6
	deleting := slice("deleting", ep(2))
	deleting.DeletionTimestamp = ptr.To(metav1.Now())
	unnamed := slice("", ep(3))
	first, second := slice("twin", ep(4)), slice("twin", ep(5))
	in := input(10, 0, eps(0, 6), otherPorts, otherType, deleting, unnamed, nil, first, second)
	r := Plan(in)
	var ignored []string
	for _, ig := range r.Ignored {
		ignored = append(ignored, ig.Name+": "+ig.Reason)
	}
	slices.Sort(ignored)
	if len(ignored) != 5 || !strings.HasPrefix(ignored[0], ": ") || !strings.HasPrefix(ignored[4], "twin: ") {
		t.Errorf("ignored %q", ignored)
	}
	// Only the first twin is the set's; the rest of the endpoints go into it.
	if !slices.Equal(names(r.Update), []string{"twin"}) || len(r.Update[0].Endpoints) != 6 || len(r.Create)+len(r.Delete) != 0 {
		t.Errorf("update %v sizes %v create %v delete %v", names(r.Update), sizes(r.Update), sizes(r.Create), names(r.Delete))
	}
}

func TestPlanPortOrderDoesNotMatter(t *testing.T) {
	two := []discoveryv1.EndpointPort{testPorts[0], {Name: ptr.To("dns"), Port: ptr.To[int32](53), Protocol: ptr.To(corev1.ProtocolUDP)}}
	s := slice("a", eps(0, 2)...)
	s.Ports = []discoveryv1.EndpointPort{two[1], two[0]}
	in := input(10, 0, eps(0, 2), s)
	in.Ports = two
	if r := Plan(in); r.Writes() != 0 || len(r.Ignored) != 0 {
		t.Errorf("reordered ports: %d writes, ignored %v", r.Writes(), r.Ignored)
	}
}

func TestPlanHugeSlackNeverCompacts(t *testing.T) {
	in := input(10, math.MaxInt, eps(0, 3), slice("a", ep(0)), slice("b", ep(1)), slice("c", ep(2)))
	if r := Plan(in); r.Writes() != 0 || r.Err != nil {
		t.Errorf("%d writes, err %v", r.Writes(), r.Err)
	}
}

func TestPlanRejectsInvalidInput(t *testing.T) {
	for _, in := range []Input{input(0, 0, eps(0, 1)), input(1001, 0, eps(0, 1)), input(10, -1, eps(0, 1))} {
		if r := Plan(in); r.Err == nil || r.Writes() != 0 {
			t.Errorf("max %d slack %d: err %v, %d writes", in.MaxPerSlice, in.Slack, r.Err, r.Writes())
		}
	}
	noAddress := ep(1)
	noAddress.Addresses = nil
	r := Plan(input(10, 0, []discoveryv1.Endpoint{ep(0), noAddress, ep(0), notReadyEP(0)}))
	if r.Stats.InvalidDesired != 1 || r.Stats.DuplicateDesired != 2 || len(r.Create) != 1 || len(r.Create[0].Endpoints) != 1 ||
		!*r.Create[0].Endpoints[0].Conditions.Ready {
		t.Errorf("stats %+v creates %v: want the first copy of p0 only", r.Stats, r.Create)
	}
}

func TestPlanDoesNotDependOnExistingOrder(t *testing.T) {
	existing := []*discoveryv1.EndpointSlice{
		slice("a", eps(0, 3)...), slice("b", eps(10, 17)...), slice("c", eps(20, 22)...), slice("d", eps(30, 34)...),
	}
	desired := slices.Concat(eps(0, 2), eps(10, 17), eps(20, 22), eps(30, 34), eps(40, 49))
	first := Plan(input(10, 0, desired, existing...))
	rng := rand.New(rand.NewPCG(1, 2))
	for range 10 {
		rng.Shuffle(len(existing), func(i, j int) { existing[i], existing[j] = existing[j], existing[i] })
		if got := Plan(input(10, 0, desired, existing...)); !equality.Semantic.DeepEqual(got, first) {
			t.Fatalf("order of Existing changed the plan")
		}
	}
}

func TestPlanDecidedHints(t *testing.T) {
	// a holds 3 endpoints, b 5: b is closest to full.
	a := slice("a", hinted(ep(0), "zone-a"), hinted(ep(1), "zone-b"), ep(2))
	b := slice("b", eps(3, 8)...)
	desired := eps(0, 8)
	decide := func(h map[int]*discoveryv1.EndpointHints) map[endpoints.Identity]*discoveryv1.EndpointHints {
		out := map[endpoints.Identity]*discoveryv1.EndpointHints{}
		for i, hints := range h {
			e := ep(i)
			out[endpoints.IdentityOf(&e)] = hints
		}
		return out
	}
	zone := func(z string) *discoveryv1.EndpointHints { return hinted(ep(0), z).Hints }
	cases := []struct {
		name     string
		desired  []discoveryv1.Endpoint
		hints    map[int]*discoveryv1.EndpointHints
		updates  []string
		rehinted int
		check    func(t *testing.T, r Result)
	}{
		{name: "decisions matching the slices cost nothing",
			desired: desired, hints: map[int]*discoveryv1.EndpointHints{0: zone("zone-a"), 1: zone("zone-b"), 3: nil}},
		{name: "unset and empty hints are the same",
			desired: desired, hints: map[int]*discoveryv1.EndpointHints{2: {}}},
		{name: "a changed hint rewrites only its slice, keeping the other hints",
			desired: desired, hints: map[int]*discoveryv1.EndpointHints{1: zone("zone-c")}, updates: []string{"a"}, rehinted: 1,
			check: func(t *testing.T, r Result) {
				got := r.Update[0].Endpoints
				if got[0].Hints.ForZones[0].Name != "zone-a" || got[1].Hints.ForZones[0].Name != "zone-c" || got[2].Hints != nil {
					t.Errorf("endpoints after update: %v", got)
				}
			}},
		{name: "clearing hints rewrites the slice",
			desired: desired, hints: map[int]*discoveryv1.EndpointHints{0: nil, 1: nil}, updates: []string{"a"}, rehinted: 2},
		{name: "a new endpoint joins the slice rewritten for its hints, not the fullest untouched one",
			desired: eps(0, 9), hints: map[int]*discoveryv1.EndpointHints{1: zone("zone-c"), 8: zone("zone-d")}, updates: []string{"a"}, rehinted: 1,
			check: func(t *testing.T, r Result) {
				got := r.Update[0].Endpoints
				if len(got) != 4 || got[3].Hints.ForZones[0].Name != "zone-d" {
					t.Errorf("endpoints after update: %v", got)
				}
			}},
		{name: "a decision overrides the hints a new desired endpoint brings",
			desired: append(eps(0, 8), hinted(ep(8), "zone-x")), hints: map[int]*discoveryv1.EndpointHints{8: nil}, updates: []string{"b"},
			check: func(t *testing.T, r Result) {
				if got := r.Update[0].Endpoints; len(got) != 6 || got[5].Hints != nil {
					t.Errorf("endpoints after update: %v", got)
				}
			}},
		{name: "a changed endpoint takes the decided hints",
			desired: append([]discoveryv1.Endpoint{notReadyEP(0)}, eps(1, 8)...), hints: map[int]*discoveryv1.EndpointHints{0: zone("zone-q")}, updates: []string{"a"},
			check: func(t *testing.T, r Result) {
				if got := r.Update[0].Endpoints[0]; *got.Conditions.Ready || got.Hints.ForZones[0].Name != "zone-q" {
					t.Errorf("changed endpoint: %v", got)
				}
			}},
		{name: "decisions for endpoints no longer desired are ignored",
			desired: desired, hints: map[int]*discoveryv1.EndpointHints{42: zone("zone-a")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := input(10, 1, tc.desired, a, b)
			in.Hints = decide(tc.hints)
			r := Plan(in)
			if r.Err != nil || len(r.Create)+len(r.Delete) != 0 || !slices.Equal(names(r.Update), tc.updates) {
				t.Fatalf("updates %v creates %d deletes %d err %v, want updates %v", names(r.Update), len(r.Create), len(r.Delete), r.Err, tc.updates)
			}
			if r.Stats.Rehinted != tc.rehinted {
				t.Errorf("Stats.Rehinted = %d, want %d", r.Stats.Rehinted, tc.rehinted)
			}
			if tc.check != nil {
				tc.check(t, r)
			}
			if a.Endpoints[1].Hints.ForZones[0].Name != "zone-b" || a.Endpoints[2].Hints != nil {
				t.Fatal("Plan modified an existing slice")
			}
		})
	}
}
