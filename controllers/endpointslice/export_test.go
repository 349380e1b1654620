package endpointslice

// ReadsPodsInPlace reports whether SetupWithManager found the Pod informer's index, so that syncs
// read selected Pods in place rather than through a copying List.
func ReadsPodsInPlace(r *Reconciler) bool { return r.pods != nil }
