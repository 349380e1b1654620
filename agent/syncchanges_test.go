package agent

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fleetslice/fleetslice/agent/dataplane"
)

// recordingDataplane records what each sync was given, and asks for every Service while
// needAll is set.
type recordingDataplane struct {
	needAll bool
	calls   []string
	updated []string
	removed []string
}

func (d *recordingDataplane) Sync(_ context.Context, services []dataplane.Service, full bool) (dataplane.Stats, error) {
	d.calls = append(d.calls, "sync")
	return dataplane.Stats{Full: full, Services: len(services)}, nil
}

func (d *recordingDataplane) SyncChanges(_ context.Context, updated []dataplane.Service, removed []string) (dataplane.Stats, error) {
	if d.needAll {
		d.calls = append(d.calls, "declined")
		return dataplane.Stats{}, dataplane.ErrNeedsEverything
	}
	d.calls = append(d.calls, "changes")
	d.updated, d.removed = nil, removed
	for _, s := range updated {
		d.updated = append(d.updated, s.Key())
	}
	return dataplane.Stats{}, nil
}

// The agent tells a ChangesDataplane only what it converted again, and gives it every Service
// on a full sync and whenever it declines.
func TestSyncGivesOnlyTheChanges(t *testing.T) {
	s := scaleStore(50, 2)
	dp := &recordingDataplane{}
	sync := func(full bool) {
		t.Helper()
		p := s.refresh(full)
		if _, err := syncDataplane(context.Background(), dp, &p, full); err != nil {
			t.Fatal(err)
		}
	}
	sync(true)
	key := types.NamespacedName{Namespace: "ns", Name: "svc-00007"}
	s.setService(key, svc(func(sv *corev1.Service) {
		sv.Name = key.Name
		sv.Spec.ClusterIP, sv.Spec.ClusterIPs = "10.0.0.8", []string{"10.0.0.8"}
		sv.Spec.Ports[0].Port = 81
	}))
	sync(false)
	if !slices.Equal(dp.updated, []string{"ns/svc-00007"}) || len(dp.removed) != 0 {
		t.Errorf("changes: updated %v, removed %v", dp.updated, dp.removed)
	}
	gone := types.NamespacedName{Namespace: "ns", Name: "svc-00009"}
	s.setService(gone, nil)
	dp.needAll = true
	sync(false)
	if want := []string{"sync", "changes", "declined", "sync"}; !slices.Equal(dp.calls, want) {
		t.Errorf("calls %v, want %v", dp.calls, want)
	}
	dp.needAll = false
	s.setService(key, nil)
	sync(false)
	if len(dp.updated) != 0 || !slices.Equal(dp.removed, []string{"ns/svc-00007"}) {
		t.Errorf("removal: updated %v, removed %v", dp.updated, dp.removed)
	}
}
