package faultproxy

import (
	"maps"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Request is what the proxy needs to know of an API request.
type Request struct {
	// Write is true for create, update, patch and delete.
	Write bool
	// Verb is create, update, patch or delete for writes; get, list or watch for reads of a
	// resource; the HTTP method otherwise.
	Verb string
	// Resource is the resource's plural name ("endpointslices"), with "/status" for the status
	// subresource.
	Resource string
}

// Classify reads an API request's method, path (/api/v1/namespaces/ns/pods/name,
// /apis/group/version/resource/name/status, ...) and whether it asks to watch.
func Classify(method, path string, watch bool) Request {
	verbs := map[string]string{
		http.MethodPost: "create", http.MethodPut: "update",
		http.MethodPatch: "patch", http.MethodDelete: "delete",
	}
	verb, write := verbs[method]
	if !write {
		verb = method
	}
	parts := strings.Split(strings.Trim(path, "/"), "/")
	// Past the group version: /api/v1 or /apis/<group>/<version>.
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return Request{Verb: verb}
	}
	if len(parts) >= 2 && parts[0] == "namespaces" {
		if len(parts) == 2 {
			return Request{Write: write, Verb: verb, Resource: "namespaces"}
		}
		parts = parts[2:]
	}
	if len(parts) == 0 {
		return Request{Verb: verb}
	}
	resource := parts[0]
	if len(parts) >= 3 {
		resource += "/" + parts[2]
	}
	if method == http.MethodGet {
		switch {
		case watch:
			verb = "watch"
		case len(parts) == 1:
			verb = "list"
		default:
			verb = "get"
		}
	}
	return Request{Write: write, Verb: verb, Resource: resource}
}

// Key is one kind of write.
type Key struct{ Resource, Verb string }

// Count is how many requests of one kind the client made, how many of them the proxy failed, and
// how many could not reach the server at all.
type Count struct{ Total, Failed, Unreachable int }

// Counts are a proxy's write counts by kind.
type Counts map[Key]Count

// Sub returns the writes made since before.
func (c Counts) Sub(before Counts) Counts {
	out := Counts{}
	for k, v := range c {
		d := Count{Total: v.Total - before[k].Total, Failed: v.Failed - before[k].Failed, Unreachable: v.Unreachable - before[k].Unreachable}
		if d != (Count{}) {
			out[k] = d
		}
	}
	return out
}

// Add returns the sum of two counts.
func (c Counts) Add(o Counts) Counts {
	out := maps.Clone(c)
	if out == nil {
		out = Counts{}
	}
	for k, v := range o {
		out[k] = Count{Total: out[k].Total + v.Total, Failed: out[k].Failed + v.Failed, Unreachable: out[k].Unreachable + v.Unreachable}
	}
	return out
}

// Writes sums the writes that reached the server (failed ones included: a 409 or 500 was still
// answered by it, or by the proxy in its place), leaving out the resources skip names (such as
// "leases" and "events").
func (c Counts) Writes(skip ...string) int {
	n := 0
	for k, v := range c {
		if isWrite(k.Verb) && !slices.Contains(skip, k.Resource) {
			n += v.Total - v.Unreachable
		}
	}
	return n
}

// Unreachable sums the requests that could not reach the server.
func (c Counts) Unreachable() int {
	n := 0
	for _, v := range c {
		n += v.Unreachable
	}
	return n
}

// Requests sums the requests of one verb ("list", say), whatever the resource.
func (c Counts) Requests(verb string) int {
	n := 0
	for k, v := range c {
		if k.Verb == verb {
			n += v.Total
		}
	}
	return n
}

// OnlyWrites keeps the writes, for messages.
func (c Counts) OnlyWrites() Counts {
	out := Counts{}
	for k, v := range c {
		if isWrite(k.Verb) {
			out[k] = v
		}
	}
	return out
}

func isWrite(verb string) bool {
	return verb == "create" || verb == "update" || verb == "patch" || verb == "delete"
}

// Failed sums the writes the proxy failed.
func (c Counts) Failed() int {
	n := 0
	for _, v := range c {
		n += v.Failed
	}
	return n
}

// String lists the counts in a stable order, for failure messages.
func (c Counts) String() string {
	keys := make([]Key, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].Resource != keys[j].Resource {
			return keys[i].Resource < keys[j].Resource
		}
		return keys[i].Verb < keys[j].Verb
	})
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(k.Verb + " " + k.Resource + ": ")
		b.WriteString(strconv.Itoa(c[k].Total))
		if c[k].Failed > 0 {
			b.WriteString(" (" + strconv.Itoa(c[k].Failed) + " failed)")
		}
		if c[k].Unreachable > 0 {
			b.WriteString(" (" + strconv.Itoa(c[k].Unreachable) + " unreachable)")
		}
	}
	if b.Len() == 0 {
		return "none"
	}
	return b.String()
}
