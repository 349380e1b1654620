package agentbench

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/fleetslice/fleetslice/agent/dataplane"
	"github.com/fleetslice/fleetslice/internal/lab/testutil"
)

// dryRunDump programs services with a full sync into a Fake and returns its dump.
func dryRunDump(t *testing.T, services []dataplane.Service) string {
	t.Helper()
	d, err := dataplane.NewDryRun(dataplaneOptions())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Sync(context.Background(), services, true); err != nil {
		t.Fatal(err)
	}
	return d.Ruleset()
}

func mustRender(t *testing.T, services []dataplane.Service) *tableModel {
	t.Helper()
	m, err := freshRender(context.Background(), services)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func mustParse(t *testing.T, text string) *tableModel {
	t.Helper()
	m, err := parseCommands(text)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestFreshRenderMatchesDataplaneRender(t *testing.T) {
	services := buildServices(120, 10)
	rendered, _, err := dataplane.Render(context.Background(), services, dataplaneOptions())
	if err != nil {
		t.Fatal(err)
	}
	want := mustRender(t, services)
	if diff := compareTables(mustParse(t, rendered), want); diff != "" {
		t.Fatalf("dataplane.Render and the recorded transaction differ: %s", diff)
	}
	c := want.counts()
	// 120 Services: 15 fixed chains, 3 shared pick chains (cluster, NodePort and Local NodePort
	// traffic to 10 endpoints), and the 2 affinity Services' own chains (a service chain and a
	// record chain each); 9 fixed sets and maps, the 6 shared endpoint maps, the cluster pick
	// chain's set, and per affinity Service its 2 client maps. The other Services have only set
	// and map elements.
	if c.Chains != 15+3+2*2 || c.Sets != 9+6+1+2*2 {
		t.Errorf("counts %+v, want 22 chains and 20 sets and maps", c)
	}
}

// TestComparisonCatchesBrokenTables feeds the checker tables that differ from the render in one
// way each: every one must be reported.
func TestComparisonCatchesBrokenTables(t *testing.T) {
	services := buildServices(60, 10)
	dump := dryRunDump(t, services)
	want := mustRender(t, services)
	if diff := compareTables(mustParse(t, dump), want); diff != "" {
		t.Fatalf("an intact table is reported: %s", diff)
	}
	lines := strings.Split(dump, "\n")
	// firstWith returns the first line starting with prefix and containing every word.
	firstWith := func(prefix string, words ...string) int {
		for i, l := range lines {
			if strings.HasPrefix(l, prefix) && !slices.ContainsFunc(words, func(w string) bool { return !strings.Contains(l, w) }) {
				return i
			}
		}
		t.Fatalf("dump has no %q line with %q", prefix, words)
		return -1
	}
	edits := map[string]func([]string) []string{
		"element missing": func(ls []string) []string {
			i := firstWith("add element ip fleetslice cluster-ports ")
			return append(ls[:i:i], ls[i+1:]...)
		},
		"element leads elsewhere": func(ls []string) []string {
			i := firstWith("add element ip fleetslice service-nodeports ", "goto pick-nodeport-")
			ls[i] = strings.Replace(ls[i], "goto pick-nodeport-", "goto pick-local-", 1)
			return ls
		},
		"endpoint address changed in a map": func(ls []string) []string {
			i := firstWith("add element ip fleetslice cluster-endpoints-tcp ", " 10.128.")
			ls[i] = strings.Replace(ls[i], " 10.128.", " 10.129.", 1)
			return ls
		},
		"extra rule": func(ls []string) []string {
			i := firstWith("add rule ip fleetslice pick-")
			return append(ls, ls[i])
		},
		"extra chain": func(ls []string) []string {
			return append(ls, "add chain ip fleetslice stray", "add rule ip fleetslice stray counter")
		},
		"map missing": func(ls []string) []string {
			i := firstWith("add map ip fleetslice aff-")
			return append(ls[:i:i], ls[i+1:]...)
		},
	}
	for name, edit := range edits {
		t.Run(name, func(t *testing.T) {
			broken := edit(append([]string(nil), lines...))
			if diff := compareTables(mustParse(t, strings.Join(broken, "\n")), want); diff == "" {
				t.Error("not reported")
			} else {
				t.Log(diff)
			}
		})
	}
}

// TestEmptyChainsAreIgnored: chains flushed and awaiting deletion are not a difference.
func TestEmptyChainsAreIgnored(t *testing.T) {
	services := buildServices(20, 3)
	dump := dryRunDump(t, services) + "add chain ip fleetslice svc-STALE-ns-1/svc-1/tcp/http\n"
	if diff := compareTables(mustParse(t, dump), mustRender(t, services)); diff != "" {
		t.Errorf("an empty chain is reported: %s", diff)
	}
}

// listing is what `nft --json list table` printed for a small table, trimmed.
const listing = `{"nftables": [{"metainfo": {"version": "1.0.6", "json_schema_version": 1}},
 {"table": {"family": "ip", "name": "fleetslice", "handle": 3}},
 {"chain": {"family": "ip", "table": "fleetslice", "name": "nat-output", "handle": 2, "type": "nat", "hook": "output", "prio": -100, "policy": "accept"}},
 {"chain": {"family": "ip", "table": "fleetslice", "name": "svc-A-ns/a/tcp/http", "handle": 9}},
 {"chain": {"family": "ip", "table": "fleetslice", "name": "ep-B-ns/a/tcp/http/10.128.0.1:8080", "handle": 10}},
 {"chain": {"family": "ip", "table": "fleetslice", "name": "rec-D", "handle": 11}},
 {"map": {"family": "ip", "name": "service-ips", "table": "fleetslice", "type": ["ipv4_addr", "inet_proto", "inet_service"], "handle": 14, "map": "verdict",
   "elem": [[{"concat": ["10.96.0.1", "tcp", 80]}, {"goto": {"target": "svc-A-ns/a/tcp/http"}}]]}},
 {"map": {"family": "ip", "name": "no-endpoint-nodeports", "table": "fleetslice", "type": ["inet_proto", "inet_service"], "handle": 15, "map": "verdict",
   "elem": [[{"concat": ["tcp", 30001]}, {"drop": null}]]}},
 {"set": {"family": "ip", "name": "pod-cidrs", "table": "fleetslice", "type": "ipv4_addr", "handle": 16, "flags": ["interval"],
   "elem": [{"prefix": {"addr": "10.0.0.0", "len": 8}}]}},
 {"set": {"family": "ip", "name": "aff-C", "table": "fleetslice", "type": "ipv4_addr", "handle": 17, "flags": ["timeout", "dynamic"], "timeout": 10800}},
 {"rule": {"family": "ip", "table": "fleetslice", "chain": "nat-output", "handle": 20, "expr": [{"jump": {"target": "services"}}]}},
 {"rule": {"family": "ip", "table": "fleetslice", "chain": "svc-A-ns/a/tcp/http", "handle": 21, "expr": [{"match": {"op": "==", "left": {"payload": {"protocol": "ip", "field": "saddr"}}, "right": "@aff-C"}}, {"goto": {"target": "ep-B-ns/a/tcp/http/10.128.0.1:8080"}}]}},
 {"rule": {"family": "ip", "table": "fleetslice", "chain": "svc-A-ns/a/tcp/http", "handle": 22, "expr": [{"match": {"op": "==", "left": {"meta": {"key": "l4proto"}}, "right": "tcp"}},
   {"dnat": {"family": "ip", "addr": {"map": {"key": {"numgen": {"mode": "random", "mod": 2, "offset": 0}}, "data": {"set": [[1, {"concat": ["10.128.0.2", 8080]}], [0, {"concat": ["10.128.0.1", 8080]}]]}}}, "type_flags": ["map", "concat"]}}]}},
 {"rule": {"family": "ip", "table": "fleetslice", "chain": "ep-B-ns/a/tcp/http/10.128.0.1:8080", "handle": 23, "expr": [{"dnat": {"family": "ip", "addr": "10.128.0.1", "port": 8080}}]}},
 {"rule": {"family": "ip", "table": "fleetslice", "chain": "rec-D", "handle": 24, "expr": [{"match": {"op": "==", "left": {"meta": {"key": "l4proto"}}, "right": "tcp"}},
   "update @aff-C { ip saddr : ip daddr }"]}}
]}`

// commands is the same table as knftables writes it.
const commands = `add table ip fleetslice { comment "fleetslice node agent" ; }
add chain ip fleetslice nat-output { type nat hook output priority -100 ; }
add chain ip fleetslice svc-A-ns/a/tcp/http
add chain ip fleetslice ep-B-ns/a/tcp/http/10.128.0.1:8080
add chain ip fleetslice rec-D
add map ip fleetslice service-ips { type ipv4_addr . inet_proto . inet_service : verdict ; }
add map ip fleetslice no-endpoint-nodeports { type inet_proto . inet_service : verdict ; }
add set ip fleetslice pod-cidrs { type ipv4_addr ; flags interval ; }
add set ip fleetslice aff-C { type ipv4_addr ; flags dynamic,timeout ; timeout 10800s ; }
add rule ip fleetslice nat-output jump services
add rule ip fleetslice svc-A-ns/a/tcp/http ip saddr @aff-C goto ep-B-ns/a/tcp/http/10.128.0.1:8080
add rule ip fleetslice svc-A-ns/a/tcp/http meta l4proto tcp dnat ip addr . port to numgen random mod 2 map { 0 : 10.128.0.1 . 8080 , 1 : 10.128.0.2 . 8080 }
add rule ip fleetslice ep-B-ns/a/tcp/http/10.128.0.1:8080 meta l4proto tcp dnat ip to 10.128.0.1:8080
add rule ip fleetslice rec-D meta l4proto tcp update @aff-C { ip saddr : ip daddr }
add element ip fleetslice service-ips { 10.96.0.1 . tcp . 80 : goto svc-A-ns/a/tcp/http }
add element ip fleetslice no-endpoint-nodeports { tcp . 30001 : drop }
add element ip fleetslice pod-cidrs { 10.0.0.0/8 }
`

func TestListingReadsLikeCommands(t *testing.T) {
	listed, err := parseListing([]byte(listing))
	if err != nil {
		t.Fatal(err)
	}
	if diff := compareTables(listed, mustParse(t, commands)); diff != "" {
		t.Fatalf("the listing and the commands differ: %s\nlisting: %q\ncommands: %q",
			diff, listed.lines(), mustParse(t, commands).lines())
	}
	// An endpoint's address inside a chain name is a name, not an address of the rule.
	changed := strings.Replace(commands, "to 10.128.0.1:8080", "to 10.128.0.9:8080", 1)
	if diff := compareTables(listed, mustParse(t, changed)); diff == "" {
		t.Error("a changed DNAT target is not reported")
	}
}

// TestKernelDriftIsReported changes the kernel's table behind the checker's back.
func TestKernelDriftIsReported(t *testing.T) {
	requireKernel(t)
	b, err := newKernelBackend()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := b.close(); err != nil {
			t.Error(err)
		}
	}()
	ctx := context.Background()
	services := buildServices(50, 4)
	s, err := b.fresh(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.sync(ctx, s, services, true); err != nil {
		t.Fatal(err)
	}
	want := mustRender(t, services)
	compare := func() string {
		got, err := b.table(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return compareTables(got, want)
	}
	if diff := compare(); diff != "" {
		t.Fatalf("the kernel's table differs from the render right after a full sync: %s", diff)
	}
	if _, err := b.ns.Command("", "nft", "delete", "element", "ip", dataplane.TableName, "cluster-ports",
		"{ 10.96.0.3 . tcp . 80 }"); err != nil {
		t.Fatal(err)
	}
	if diff := compare(); !strings.Contains(diff, "10.96.0.3 . tcp . 80") {
		t.Errorf("a deleted element is not reported: %q", diff)
	}
}

func requireKernel(t *testing.T) {
	t.Helper()
	testutil.RequireKernel(t, "the nftables dataplane", kernelMissing())
}
