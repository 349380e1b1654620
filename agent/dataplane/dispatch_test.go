package dataplane

import (
	"fmt"
	"math/big"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var cascadeGuard = regexp.MustCompile(`^numgen random mod (\d+) == 0 `)

// TestCascadeSpreadsEvenly checks the probabilities the cascade's moduli give: rule i matches
// when every earlier rule missed and its own draw hits, and each endpoint must end up with
// exactly 1/n of new connections.
func TestCascadeSpreadsEvenly(t *testing.T) {
	svc := &Service{Namespace: "ns", Name: "svc"}
	port := Port{Name: "http", Protocol: TCP, Port: 80}
	for n := 1; n <= maxCascadeEndpoints; n++ {
		eps := make([]Endpoint, n)
		for i := range eps {
			eps[i] = Endpoint{Addr: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)}), 8080)}
		}
		rules := dispatchRules(svc, port, eps, ipv4)
		if len(rules) != n {
			t.Fatalf("n=%d: %d rules", n, len(rules))
		}
		missedSoFar := big.NewRat(1, 1)
		for i, rule := range rules {
			hit := big.NewRat(1, 1) // the last rule takes whatever is left
			if m := cascadeGuard.FindStringSubmatch(rule); m != nil {
				mod, _ := strconv.Atoi(m[1])
				hit = big.NewRat(1, int64(mod))
			} else if i != n-1 {
				t.Fatalf("n=%d: rule %d is unguarded but not last: %q", n, i, rule)
			}
			if p := new(big.Rat).Mul(missedSoFar, hit); p.Cmp(big.NewRat(1, int64(n))) != 0 {
				t.Fatalf("n=%d: endpoint %d gets %s of connections, want 1/%d", n, i, p, n)
			}
			if !strings.HasSuffix(rule, "dnat ip to "+eps[i].Addr.String()) {
				t.Fatalf("n=%d: rule %d = %q does not go to %s", n, i, rule, eps[i].Addr)
			}
			missedSoFar.Mul(missedSoFar, new(big.Rat).Sub(big.NewRat(1, 1), hit))
		}
	}
}

// Beyond maxCascadeEndpoints a connection would evaluate too many rules; one inline map keeps
// the per-packet cost flat.
func TestManyEndpointsUseOneInlineMap(t *testing.T) {
	n := maxCascadeEndpoints + 1
	eps := make([]Endpoint, n)
	for i := range eps {
		eps[i] = Endpoint{Addr: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 1, byte(i + 1)}), 8080)}
	}
	rules := dispatchRules(&Service{Namespace: "ns", Name: "big"}, Port{Name: "http", Protocol: TCP, Port: 80}, eps, ipv4)
	want := fmt.Sprintf("numgen random mod %d map { 0 : 10.0.1.1 . 8080 ,", n)
	if len(rules) != 1 || !strings.Contains(rules[0], want) {
		t.Fatalf("rules = %q, want one inline map (%q)", rules, want)
	}
}
