package endpointslice

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fleetslice/fleetslice/controllers/endpointslice/hints"
)

// reportHints emits TopologyAwareHintsEnabled or TopologyAwareHintsDisabled, with the reason,
// whenever an address type's hint state changes, never on every sync. A Service that never asked
// for hints gets no event, and neither does one whose slices already carried its hints when this
// manager first synced it.
func (r *Reconciler) reportHints(svc *corev1.Service, decisions []hints.Decision) {
	service := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	for _, d := range decisions {
		if d.Changed > 0 {
			topologyHintChanges.WithLabelValues(string(d.Mode)).Add(float64(d.Changed))
		}
		state := "on"
		if !d.Enabled {
			state = "off:" + d.Reason
		}
		key := hintKey{service: service, addressType: d.AddressType}
		r.hintMu.Lock()
		prev, known := r.hintStates[key]
		r.hintStates[key] = state
		r.hintMu.Unlock()
		// A Service first met with its hints already in place (a restarted manager meeting it
		// again) has nothing new to announce. Hints not applied are announced on first sight
		// either way: the user asked for them and should hear why they are missing.
		alreadyOn := d.Enabled && d.Changed == 0 && d.Hinted > 0
		if prev == state || (!known && (d.Mode == hints.None || alreadyOn)) {
			continue
		}
		// The events API folds events that differ only in their note into one series, so the
		// reason code goes into the action too: each distinct reason stays visible.
		switch {
		case d.Enabled:
			r.Recorder.Eventf(svc, nil, corev1.EventTypeNormal, "TopologyAwareHintsEnabled", "UpdateHints",
				"Topology aware hints enabled for %s endpoints (%s)", d.AddressType, d.Mode)
		case d.Mode == hints.None:
			r.Recorder.Eventf(svc, nil, corev1.EventTypeNormal, "TopologyAwareHintsDisabled", d.Reason,
				"Topology aware hints removed from %s endpoints: %s (%s)", d.AddressType, d.Reason, d.Message)
		default:
			r.Recorder.Eventf(svc, nil, corev1.EventTypeWarning, "TopologyAwareHintsDisabled", d.Reason,
				"Topology aware hints (%s) not applied to %s endpoints: %s (%s)", d.Mode, d.AddressType, d.Reason, d.Message)
		}
	}
}

// forgetHints drops the remembered hint states of a deleted Service.
func (r *Reconciler) forgetHints(service types.NamespacedName) {
	r.hintMu.Lock()
	defer r.hintMu.Unlock()
	for key := range r.hintStates {
		if key.service == service {
			delete(r.hintStates, key)
		}
	}
}
