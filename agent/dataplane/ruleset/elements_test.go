package ruleset

import (
	"net/netip"
	"reflect"
	"testing"
)

func runOf(set string, ports ...uint16) *Elements {
	return &Elements{Count: len(ports), Each: func(yield func(*Element) bool) {
		for _, p := range ports {
			if !yield(&Element{Set: set, Key: []Value{Addr(netip.MustParseAddr("10.0.0.1")), Port(p)}}) {
				return
			}
		}
	}}
}

func TestAllSpellsRunsOutInPlace(t *testing.T) {
	ops := []Op{
		{Verb: Add, Obj: &Chain{Name: "a"}},
		{Verb: Add, Obj: runOf("s", 1, 2)},
		{Verb: Delete, Obj: runOf("t", 3)},
		{Verb: Add, Obj: runOf("u")},
		{Verb: Add, Obj: &Chain{Name: "b"}},
	}
	var got []string
	for o := range All(ops) {
		switch obj := o.Obj.(type) {
		case *Chain:
			got = append(got, "chain "+obj.Name)
		case *Element:
			got = append(got, map[Verb]string{Add: "add ", Delete: "delete "}[o.Verb]+obj.Set+" "+itoa(obj.Key[1].Num))
		default:
			t.Fatalf("All yielded a %T", o.Obj)
		}
	}
	want := []string{"chain a", "add s 1", "add s 2", "delete t 3", "chain b"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("All yielded %q, want %q", got, want)
	}
	if n, e := Count(ops), len(Expand(ops)); n != 5 || e != 5 {
		t.Fatalf("Count %d and len(Expand) %d, want 5", n, e)
	}
}

func TestAllStopsInsideARun(t *testing.T) {
	ops := []Op{{Verb: Add, Obj: runOf("s", 1, 2, 3)}, {Verb: Add, Obj: &Chain{Name: "never"}}}
	n := 0
	for o := range All(ops) {
		if _, ok := o.Obj.(*Chain); ok {
			t.Fatal("All went on past a stop")
		}
		if n++; n == 2 {
			break
		}
	}
	if n != 2 {
		t.Fatalf("read %d, want 2", n)
	}
}

// reusedRunOf yields one Element rewritten for each port, as the dataplane's runs do.
func reusedRunOf(set string, ports ...uint16) *Elements {
	return &Elements{Count: len(ports), Each: func(yield func(*Element) bool) {
		var e Element
		key := make([]Value, 2)
		v := Verdict{Kind: Goto}
		for _, p := range ports {
			key[0], key[1] = Addr(netip.MustParseAddr("10.0.0.1")), Port(p)
			v.Chain = "c" + itoa(uint32(p))
			e = Element{Set: set, Map: true, Key: key, Verdict: &v}
			if !yield(&e) {
				return
			}
		}
	}}
}

func TestExpandKeepsEachElementOfARunThatReusesOne(t *testing.T) {
	got := Expand([]Op{{Verb: Add, Obj: reusedRunOf("m", 1, 2, 3)}})
	for i, o := range got {
		e := o.Obj.(*Element)
		if p := e.Key[1].Num; p != uint32(i+1) || e.Verdict.Chain != "c"+itoa(p) {
			t.Fatalf("element %d is port %d to %s: Expand kept the run's reused element", i, p, e.Verdict.Chain)
		}
	}
}

func itoa(n uint32) string { return string(rune('0' + n)) }
