package sliceplan

import (
	"slices"
	"strings"

	discoveryv1 "k8s.io/api/discovery/v1"
)

// Changes reconcile an existing set of slices with a desired one.
type Changes struct {
	// Create holds slices to create, Update desired content carrying the existing object's
	// resourceVersion, and Delete the existing slices to remove. A slice whose address type
	// changed (which the API does not allow to update) is in both Delete and Create under the
	// same name; the writer (package slicewrite) deletes it before creating it again, and
	// makes every other create before any delete.
	Create, Update, Delete []*discoveryv1.EndpointSlice
}

// Empty reports whether nothing needs writing.
func (c Changes) Empty() bool {
	return len(c.Create) == 0 && len(c.Update) == 0 && len(c.Delete) == 0
}

// Plan compares desired slices with existing ones by name. A slice is rewritten only when its
// labels, annotations, owners, address type, endpoints or ports differ.
func Plan(desired []*discoveryv1.EndpointSlice, existing []discoveryv1.EndpointSlice) Changes {
	var changes Changes
	current := make(map[string]*discoveryv1.EndpointSlice, len(existing))
	for i := range existing {
		current[existing[i].Name] = &existing[i]
	}
	wanted := make(map[string]bool, len(desired))
	for _, want := range desired {
		if want == nil || wanted[want.Name] {
			continue
		}
		wanted[want.Name] = true
		have, ok := current[want.Name]
		switch {
		case !ok:
			changes.Create = append(changes.Create, want.DeepCopy())
		case have.AddressType != want.AddressType:
			changes.Delete = append(changes.Delete, have.DeepCopy())
			changes.Create = append(changes.Create, want.DeepCopy())
		case !SameContent(have, want):
			update := want.DeepCopy()
			update.ResourceVersion = have.ResourceVersion
			update.UID = have.UID
			changes.Update = append(changes.Update, update)
		}
	}
	for i := range existing {
		if !wanted[existing[i].Name] {
			changes.Delete = append(changes.Delete, existing[i].DeepCopy())
		}
	}
	for _, list := range [][]*discoveryv1.EndpointSlice{changes.Create, changes.Update, changes.Delete} {
		slices.SortFunc(list, func(a, b *discoveryv1.EndpointSlice) int { return strings.Compare(a.Name, b.Name) })
	}
	return changes
}
