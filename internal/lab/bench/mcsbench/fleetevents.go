package mcsbench

import (
	"context"
	"fmt"
	"strings"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// ours reports whether an Event's reporter is fleetslice's manager: its multi-cluster
// controllers report as fleetslice-*, and its EndpointSlice controller under upstream's name,
// which on light members (no kube-controller-manager) nothing else uses.
func ours(reporter string) bool {
	return strings.HasPrefix(reporter, "fleetslice") || reporter == "endpointslice-controller"
}

// othersEventWrites counts, per cluster (broker first), the Event writes since began that
// fleetslice did not make: the API server's own controllers report too (the ClusterIP
// allocator's repair loop, for one, when it meets a Service before its IPAddress). They are
// counted at the API server with ours, but no fleetslice change would remove them.
func (f *fleet) othersEventWrites(ctx context.Context, began time.Time) ([]int, error) {
	var out []int
	for _, c := range f.clusters() {
		cs, err := kubernetes.NewForConfig(c.Config)
		if err != nil {
			return nil, err
		}
		list, err := cs.EventsV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		n := 0
		fleetslice := map[string]int{}
		for _, e := range list.Items {
			reporter := e.ReportingController
			if reporter == "" {
				reporter = e.DeprecatedSource.Component
			}
			if e.CreationTimestamp.Time.Before(began.Truncate(time.Second)) {
				continue
			}
			if ours(reporter) {
				fleetslice[fmt.Sprintf("%s %s on %s", reporter, e.Reason, e.Regarding.Kind)] += eventWrites(e.DeprecatedCount, e.Series)
				continue
			}
			n += eventWrites(e.DeprecatedCount, e.Series)
		}
		// What fleetslice announced in a bulk start is what the writes check counts against it,
		// so the log says which they were.
		if len(fleetslice) > 0 {
			f.logf("%s: fleetslice's Events since the managers started: %v", c.Config.Host, fleetslice)
		}
		out = append(out, n)
	}
	return out, nil
}

// eventWrites is how many writes one Event stands for: its create and a patch per repeat. The
// core API's recorder patches every repeat into the count; a series is patched less often, so
// for it this is the most it can have cost.
func eventWrites(deprecatedCount int32, series *eventsv1.EventSeries) int {
	n := max(deprecatedCount, 1)
	if series != nil {
		n = max(n, series.Count)
	}
	return int(n)
}
