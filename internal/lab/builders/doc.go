// Package builders makes the Kubernetes objects that fleetslice's tests start from: Services,
// Pods, Nodes, EndpointSlices (plain and imported), Endpoints, ServiceExports and
// ServiceImports. Each Make function returns a wrapper holding the object; its methods change
// one thing and return the wrapper, so a test names only what it cares about:
//
//	svc := builders.MakeService("shop", "web").Selector("app", "web").Port("http", 80, intstr.FromInt32(8080)).Obj()
//
// Obj returns a pointer to the wrapped object (not a copy), so a test that needs two variants
// calls Clone first. A Make function sets only what every caller needs for the object to be
// valid (for an EndpointSlice, its address type); nothing else is defaulted, so a test never
// inherits a field it did not ask for.
//
// It lives under internal/lab because it is test scaffolding: the runtime packages (controllers,
// agent, api, cmd/manager, cmd/agent) may import it only from their _test.go files. Before it,
// the same helpers were written again in each package (importedSlice four times with four
// signatures), and the copies had drifted; guard_test.go keeps them from coming back.
package builders
