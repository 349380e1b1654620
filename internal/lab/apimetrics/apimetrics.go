// Package apimetrics reads what an API server says it served from its own /metrics: write
// requests by resource and verb, and watch events sent. Benchmarks count writes there, at the
// server, so that no client can under-report its own.
package apimetrics

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// verbNames maps the API server's request verbs to the words the tables use.
var verbNames = map[string]string{"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete", "DELETECOLLECTION": "delete"}

// Write is one kind of write an API server served.
type Write struct {
	// Resource is the resource, with "/<subresource>" when there is one (serviceimports/status).
	Resource string
	// Verb is create, update, patch or delete.
	Verb string
}

// Writes are counts of served writes; Conflicts are those refused with 409, counted in Writes too.
type Writes struct {
	Served, Conflicts map[Write]int
}

// Scrape reads the API server's metrics exposition.
func Scrape(ctx context.Context, cfg *rest.Config) ([]byte, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading API server metrics: %w", err)
	}
	return raw, nil
}

// CountWrites picks the write requests of the resources keep accepts (all when nil) out of an
// exposition. It reads only the apiserver_request_total lines: benchmarks poll it often, and a
// full parse of megabytes of exposition made the bench itself a noticeable CPU load.
func CountWrites(exposition []byte, keep func(resource string) bool) (Writes, error) {
	out := Writes{Served: map[Write]int{}, Conflicts: map[Write]int{}}
	err := EachSeries(exposition, "apiserver_request_total{", func(labels map[string]string, value float64) {
		verb, ok := verbNames[labels["verb"]]
		if !ok || (keep != nil && !keep(labels["resource"])) {
			return
		}
		w := Write{Resource: labels["resource"], Verb: verb}
		if sub := labels["subresource"]; sub != "" {
			w.Resource += "/" + sub
		}
		out.Served[w] += int(value)
		if labels["code"] == "409" {
			out.Conflicts[w] += int(value)
		}
	})
	return out, err
}

// Total sums the served writes.
func (w Writes) Total() int {
	n := 0
	for _, c := range w.Served {
		n += c
	}
	return n
}

// Without drops the writes of one resource: Lease renewals, say, which a live member makes
// whatever else happens.
func (w Writes) Without(resource string) Writes {
	keep := func(in map[Write]int) map[Write]int {
		out := map[Write]int{}
		for k, v := range in {
			if k.Resource != resource {
				out[k] = v
			}
		}
		return out
	}
	return Writes{Served: keep(w.Served), Conflicts: keep(w.Conflicts)}
}

// Sub is what w served since before.
func (w Writes) Sub(before Writes) Writes {
	diff := func(now, then map[Write]int) map[Write]int {
		out := map[Write]int{}
		for k, v := range now {
			if d := v - then[k]; d != 0 {
				out[k] = d
			}
		}
		return out
	}
	return Writes{Served: diff(w.Served, before.Served), Conflicts: diff(w.Conflicts, before.Conflicts)}
}

// WatchEvents are the watch events an API server sent and their encoded bytes, summed over
// resources keep accepts (all when nil).
func WatchEvents(exposition []byte, keep func(resource string) bool) (events, bytes int64, err error) {
	add := func(into *int64) func(map[string]string, float64) {
		return func(labels map[string]string, value float64) {
			if keep == nil || keep(labels["resource"]) {
				*into += int64(value)
			}
		}
	}
	if err := EachSeries(exposition, "apiserver_watch_events_total{", add(&events)); err != nil {
		return 0, 0, err
	}
	return events, bytes, EachSeries(exposition, "apiserver_watch_events_sizes_sum{", add(&bytes))
}

// EachRequest calls fn with every apiserver_request_total series of an exposition: reads and
// watches too, the resource with "/<subresource>" when there is one.
func EachRequest(exposition []byte, fn func(verb, resource, code string, count int)) error {
	return EachSeries(exposition, "apiserver_request_total{", func(labels map[string]string, value float64) {
		resource := labels["resource"]
		if sub := labels["subresource"]; sub != "" {
			resource += "/" + sub
		}
		fn(labels["verb"], resource, labels["code"], int(value))
	})
}

// EachSeries calls fn with the labels and value of every series whose line begins with prefix
// (a metric's name and "{"), in any Prometheus text exposition.
func EachSeries(exposition []byte, prefix string, fn func(labels map[string]string, value float64)) error {
	for line := range bytes.Lines(exposition) {
		if !bytes.HasPrefix(line, []byte(prefix)) {
			continue
		}
		closing := bytes.LastIndexByte(line, '}')
		if closing < 0 {
			return fmt.Errorf("malformed metric line %q", line)
		}
		value, err := strconv.ParseFloat(strings.TrimSpace(string(line[closing+1:])), 64)
		if err != nil {
			return fmt.Errorf("metric line %q: %w", line, err)
		}
		fn(parseLabels(string(line[len(prefix):closing])), value)
	}
	return nil
}

// parseLabels splits `a="x",b="y"`; the API server's label values here hold no quotes or commas.
func parseLabels(s string) map[string]string {
	labels := map[string]string{}
	for pair := range strings.SplitSeq(s, ",") {
		name, value, ok := strings.Cut(pair, "=")
		if ok {
			labels[name] = strings.Trim(value, `"`)
		}
	}
	return labels
}
