package statusview

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/api/allocation"
	"github.com/fleetslice/fleetslice/controllers/multicluster/names"
)

// trafficOf reads the cluster allocation a member publishes on the import's derived Service;
// a missing Service or annotation shows nothing (the import spreads as any Service does).
func trafficOf(ctx context.Context, c client.Reader, si *mcsv1beta1.ServiceImport) string {
	svc := &corev1.Service{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: si.Namespace, Name: names.DerivedServiceName(si.Namespace, si.Name)}, svc); err != nil {
		return ""
	}
	raw := svc.Annotations[allocation.Annotation]
	if raw == "" {
		return ""
	}
	a, err := allocation.Parse(raw)
	if err != nil {
		return "invalid allocation: " + err.Error()
	}
	return FormatAllocation(a)
}

// FormatAllocation writes one allocation as "small: 54% home, 46% to big; big: home", one
// entry per client cluster.
func FormatAllocation(a allocation.Allocation) string {
	parts := make([]string, 0, len(a.Clusters))
	for _, c := range a.Clusters {
		if len(c.Spill) == 0 {
			parts = append(parts, c.Cluster+": home")
			continue
		}
		var to []string
		if c.Local > 0 {
			to = append(to, percent(c.Local)+" home")
		}
		for _, s := range c.Spill {
			to = append(to, percent(s.Share)+" to "+s.To)
		}
		parts = append(parts, c.Cluster+": "+strings.Join(to, ", "))
	}
	return strings.Join(parts, "; ")
}

func percent(v float64) string { return fmt.Sprintf("%.0f%%", 100*v) }
