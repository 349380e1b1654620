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

// serviceRule matches the load-balancing rules of a Service port with a chain of its own in the
// IPv4 ruleset of older agents (ports with session affinity, or every port), chain
// svc-<hash>-<namespace>/<name>/<protocol>/<port>: a DNAT to one endpoint, to one of N
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

// A port is an element of cluster-ports (of service-ips, leading to its own chain, with session
// affinity), labelled "namespace/name:port"; a new connection picks among the elements of the
// protocol's cluster-endpoints map under the same address and port (an endpoint of weight w
// fills w).
var (
	portVerdict = regexp.MustCompile(`^add element ip fleetslice (?:cluster-ports|service-ips) \{ (\S+) \. (\w+) \. (\d+) comment "([^"]+)"(?: : goto \S+)? \}$`)
	pickElement = regexp.MustCompile(`^add element ip fleetslice cluster-endpoints-(\w+) \{ (\S+) \. (\d+) \. \d+ : (\S+) \. \d+ \}$`)
)

// sharedPorts collects, from the lines of a ruleset, the endpoints of ports that pick through the
// shared maps: "namespace/name:port" -> endpoint address -> weight.
type sharedPorts struct {
	labels    map[string]string         // "proto ip port" -> "namespace/name:port"
	endpoints map[string]map[string]int // "proto ip port" -> address -> elements
}

func (s *sharedPorts) line(line string) bool {
	if m := portVerdict.FindStringSubmatch(line); m != nil {
		s.labels[m[2]+" "+m[1]+" "+m[3]] = m[4]
		return true
	}
	if m := pickElement.FindStringSubmatch(line); m != nil {
		k := m[1] + " " + m[2] + " " + m[3]
		if s.endpoints[k] == nil {
			s.endpoints[k] = map[string]int{}
		}
		s.endpoints[k][m[4]]++
		return true
	}
	return false
}

// byPort joins labels and endpoints. A port reached through several addresses (a cluster IP
// and a ClusterSet IP) picks among the same endpoints through each; the first is kept.
func (s *sharedPorts) byPort() map[string]map[string]int {
	out := map[string]map[string]int{}
	keys := make([]string, 0, len(s.labels))
	for k := range s.labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if label := s.labels[k]; out[label] == nil && s.endpoints[k] != nil {
			out[label] = s.endpoints[k]
		}
	}
	return out
}

// PortEndpoints reads the ruleset a dry-run agent wrote and returns, for each Service port, the
// addresses its new connections (a new client's, with session affinity) go to with their
// weights, keyed "namespace/name:port".
func PortEndpoints(path string) (map[string]map[string]int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ports := sharedPorts{labels: map[string]string{}, endpoints: map[string]map[string]int{}}
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 64*1024), 1024*1024)
	for scanner.Scan() {
		ports.line(scanner.Text())
	}
	return ports.byPort(), scanner.Err()
}

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
	ports := sharedPorts{labels: map[string]string{}, endpoints: map[string]map[string]int{}}
	for scanner.Scan() {
		line := scanner.Text()
		if ports.line(line) {
			continue
		}
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
	for key, endpoints := range ports.byPort() {
		a.Endpoints[key] = len(endpoints)
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
