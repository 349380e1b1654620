package statusview

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Agent is what one node agent programmed: per Service port, how many endpoints it balances over.
type Agent struct {
	Node string
	// Endpoints maps "namespace/name:port" to the endpoints the node sends that port's traffic to.
	Endpoints map[string]int
	// Err says why the ruleset could not be read (not written yet, for instance).
	Err error
}

// serviceRule matches the load-balancing rules of a Service port in the agent's IPv4 ruleset,
// chain svc-<hash>-<namespace>/<name>/<protocol>/<port>: a DNAT to one endpoint, to one of N
// through a "numgen random mod N" map (named, as the agent writes it now, or inline), or a
// cascade of DNAT rules whose first is guarded by "numgen random mod N", as older agents wrote
// it (the largest modulus is the endpoint count each way). A weighted endpoint (a cluster
// allocation) fills several elements of a named map, so there the count is of the distinct
// endpoints among its elements, not the modulus.
var (
	serviceRule = regexp.MustCompile(`^add rule ip fleetslice svc-[A-Z0-9]+-([^/ ]+)/([^/ ]+)/([^/ ]+)/([^/ ]+) .*dnat`)
	spread      = regexp.MustCompile(`numgen random mod (\d+)`)
	mapElement  = regexp.MustCompile(`^add element ip fleetslice epsv?-[A-Z0-9]+-([^/ ]+)/([^/ ]+)/([^/ ]+)/([^/ ]+) \{ \d+ : (.+) \}$`)
)

// ReadAgent summarises the ruleset a dry-run agent wrote for node.
func ReadAgent(node, path string) Agent {
	a := Agent{Node: node, Endpoints: map[string]int{}}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		a.Err = errors.New("no ruleset yet")
		return a
	}
	if err != nil {
		a.Err = err
		return a
	}
	defer f.Close()
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 64*1024), 1024*1024)
	distinct := map[string]map[string]bool{}
	for scanner.Scan() {
		line := scanner.Text()
		if m := mapElement.FindStringSubmatch(line); m != nil {
			key := fmt.Sprintf("%s/%s:%s", m[1], m[2], m[4])
			if distinct[key] == nil {
				distinct[key] = map[string]bool{}
			}
			distinct[key][m[5]] = true
			continue
		}
		m := serviceRule.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		n := 1
		if mod := spread.FindStringSubmatch(line); mod != nil {
			n, _ = strconv.Atoi(mod[1])
		}
		key := fmt.Sprintf("%s/%s:%s", m[1], m[2], m[4])
		a.Endpoints[key] = max(a.Endpoints[key], n)
	}
	for key, endpoints := range distinct {
		if _, ok := a.Endpoints[key]; ok {
			a.Endpoints[key] = len(endpoints)
		}
	}
	a.Err = scanner.Err()
	return a
}

func (a Agent) summary() string {
	if a.Err != nil {
		return a.Err.Error()
	}
	keys := make([]string, 0, len(a.Endpoints))
	for k := range a.Endpoints {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, a.Endpoints[k]))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}
