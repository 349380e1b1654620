package dataplane

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"sigs.k8s.io/knftables"

	"github.com/fleetslice/fleetslice/agent/dataplane/nftext"
	"github.com/fleetslice/fleetslice/agent/dataplane/ruleset"
)

// A full sync compares the table it would write with the one the kernel holds and writes only
// the difference (fulldiff.go). Rules cannot be read back as ruleset values without a
// decompiler of nftables expressions, so each backend reads its table in a spelling of its own
// (a tableImage: the netlink backends as the kernel encodes each object, knftables' fake as nft
// text) and spells the objects the sync wants the same way (a speller): two objects are equal
// when their spellings are.

// tableImage is the agent's table as a backend read it back.
type tableImage struct {
	exists bool
	chains map[string]*chainImage
	sets   map[string]*setImage
}

type chainImage struct {
	def   string // its type, hook and priority as the backend spells them
	base  bool   // hooked: nothing can jump to it, so it can go at once
	rules []string
}

type setImage struct {
	def   string
	isMap bool
	// dynamic sets are filled by packets (the ClientIP affinity maps): their elements are
	// nobody's to compare, and are not read.
	dynamic bool
	elems   map[string]string // key -> the rest: value or verdict, and comment
}

func newTableImage() *tableImage {
	return &tableImage{chains: map[string]*chainImage{}, sets: map[string]*setImage{}}
}

// speller spells what a sync wants as its backend reads the kernel's table. It is pure.
type speller interface {
	chain(c *ruleset.Chain) (string, error)
	rule(stmts []ruleset.Stmt) (string, error)
	set(s *ruleset.Set) (setSpeller, error)
}

// setSpeller spells one set's definition and elements, and reads a key it spelled back into
// values, to delete an element the kernel holds and the sync does not want.
type setSpeller interface {
	def() string
	element(e *ruleset.Element) (key, rest string, err error)
	values(key string) ([]ruleset.Value, error)
}

// dumper is knftables' in-memory fake, or a wrapper of one: the one knftables.Interface that
// can show its table exactly as the Syncer spelled it (the nft program prints rules its own
// way, so New over it cannot compare rules and rebuilds instead; NewKernelNft reads the
// kernel over netlink).
type dumper interface{ Dump() string }

// read lists the fake's table; a knftables.Interface that is not one cannot be read (nil).
func (k knftablesBackend) read(ctx context.Context) (*tableImage, speller, error) {
	d, ok := k.nft.(dumper)
	if !ok {
		return nil, nil, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	sp := fakeSpeller{fam: k.fam}
	return parseDump(d.Dump(), sp.family()), sp, nil
}

// parseDump reads the lines of knftables.Fake.Dump that concern the agent's table in family.
func parseDump(dump string, family knftables.Family) *tableImage {
	img := newTableImage()
	for _, line := range strings.Split(dump, "\n") {
		verb, kind, fam, table, name, rest := dumpFields(line)
		if verb != "add" || fam != string(family) || table != TableName {
			continue
		}
		switch kind {
		case "table":
			img.exists = true
		case "chain":
			img.chains[name] = &chainImage{def: rest, base: strings.Contains(rest, " hook ")}
		case "set", "map":
			img.sets[name] = &setImage{def: kind + rest, isMap: kind == "map", dynamic: fakeDynamic(rest),
				elems: map[string]string{}}
		case "rule":
			if c := img.chains[name]; c != nil {
				c.rules = append(c.rules, strings.TrimPrefix(rest, " "))
			}
		case "element":
			if s := img.sets[name]; s != nil && !s.dynamic {
				key, value := splitElement(rest)
				s.elems[key] = value
			}
		}
	}
	return img
}

// dumpFields splits "add chain ip fleetslice name rest" (the table line has no name).
func dumpFields(line string) (verb, kind, fam, table, name, rest string) {
	f := strings.SplitN(line, " ", 6)
	if len(f) < 4 {
		return "", "", "", "", "", ""
	}
	verb, kind, fam, table = f[0], f[1], f[2], f[3]
	if len(f) > 4 {
		name = f[4]
	}
	if len(f) > 5 {
		rest = " " + f[5]
	}
	return verb, kind, fam, table, name, rest
}

var fakeFlags = regexp.MustCompile(`flags ([a-z,-]+) ;`)

func fakeDynamic(def string) bool {
	m := fakeFlags.FindStringSubmatch(def)
	return m != nil && (strings.Contains(m[1], "dynamic") || strings.Contains(m[1], "timeout"))
}

// splitElement splits " { key[ comment "c"][ : value] }" into the key and the rest, as
// knftables writes an element: a key never holds " comment " or " : ".
func splitElement(body string) (key, rest string) {
	body = strings.TrimSuffix(strings.TrimPrefix(body, " { "), " }")
	end := len(body)
	for _, sep := range []string{" comment ", " : "} {
		if i := strings.Index(body, sep); i >= 0 && i < end {
			end = i
		}
	}
	return body[:end], body[end:]
}

// fakeSpeller spells objects as nftext writes them and knftables' fake dumps them.
type fakeSpeller struct{ fam ruleset.Family }

func (f fakeSpeller) family() knftables.Family {
	if f.fam == ruleset.IPv6 {
		return knftables.IPv6Family
	}
	return knftables.IPv4Family
}

// line is obj's "add" line as knftables writes it, split as parseDump splits the fake's dump.
func (f fakeSpeller) line(obj ruleset.Object) (kind, rest string) {
	tx := knftables.NewFake(f.family(), TableName).NewTransaction()
	tx.Add(nftext.Object(f.fam, obj))
	_, kind, _, _, _, rest = dumpFields(strings.TrimSuffix(tx.String(), "\n"))
	return kind, rest
}

func (f fakeSpeller) chain(c *ruleset.Chain) (string, error) {
	_, rest := f.line(c)
	return rest, nil
}

func (f fakeSpeller) rule(stmts []ruleset.Stmt) (string, error) {
	return nftext.Rule(f.fam, stmts), nil
}

func (f fakeSpeller) set(s *ruleset.Set) (setSpeller, error) {
	kind, rest := f.line(s)
	return fakeSetSpeller{fam: f.fam, decl: s, spelled: kind + rest}, nil
}

type fakeSetSpeller struct {
	fam     ruleset.Family
	decl    *ruleset.Set
	spelled string
}

func (f fakeSetSpeller) def() string { return f.spelled }

func (f fakeSetSpeller) element(e *ruleset.Element) (string, string, error) {
	el, ok := nftext.Object(f.fam, e).(*knftables.Element)
	if !ok {
		return "", "", fmt.Errorf("element of %s: not an element", e.Set)
	}
	var rest strings.Builder
	if el.Comment != nil {
		fmt.Fprintf(&rest, " comment %q", *el.Comment)
	}
	if len(el.Value) > 0 {
		rest.WriteString(" : " + strings.Join(el.Value, " . "))
	}
	return strings.Join(el.Key, " . "), rest.String(), nil
}

func (f fakeSetSpeller) values(key string) ([]ruleset.Value, error) {
	return nftext.ParseKey(f.decl, key)
}
