package agent

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/fleetslice/fleetslice/controllers/multicluster/clusterid"
)

// ClusterIDSource says where the agent's cluster id came from.
type ClusterIDSource string

const (
	// FromClusterProperty: the ClusterProperty cluster.clusterset.k8s.io, as the manager reads it.
	FromClusterProperty ClusterIDSource = "ClusterProperty"
	// FromOptions: Options.ClusterID (the agent's --cluster-id), used when no usable
	// ClusterProperty exists.
	FromOptions ClusterIDSource = "configured"
	// NoClusterID: neither exists; imports of PreferSameCluster Services spread over every
	// cluster, as any Service does.
	NoClusterID ClusterIDSource = "none"
)

// propertyState is what the agent knows of the ClusterProperty.
type propertyState int

const (
	// propertyUnknown: not watched (its CRD is not installed, or the agent may not read it).
	propertyUnknown propertyState = iota
	// propertyAbsent: watched, and no object named cluster.clusterset.k8s.io exists.
	propertyAbsent
	// propertyPresent: the object exists; its value may still be invalid.
	propertyPresent
)

// ClusterIdentity is the outcome of resolving the cluster id.
type ClusterIdentity struct {
	ID     string
	Source ClusterIDSource
	// Warning, when set, says what was ignored: an invalid property value, or a configured id
	// that disagrees with the property.
	Warning string
}

// ResolveClusterID decides the agent's cluster id the way the manager does
// (clusterid.Resolve): the ClusterProperty's value wins, the configured id is the fallback.
// Unlike the manager the agent does not refuse to run when both exist and disagree: it
// publishes nothing under the id, it only reads the allocation row of the cluster whose
// manager published it, and that manager runs under the property's value. An invalid
// property value is ignored (no allocation row can carry it).
func ResolveClusterID(property string, propertyExists bool, configured string) ClusterIdentity {
	if propertyExists {
		err := clusterid.Validate(property)
		switch {
		case err == nil && configured != "" && configured != property:
			return ClusterIdentity{ID: property, Source: FromClusterProperty, Warning: fmt.Sprintf(
				"the configured cluster id %q differs from ClusterProperty %s %q; following the ClusterProperty, as the manager does", configured, clusterid.PropertyName, property)}
		case err == nil:
			return ClusterIdentity{ID: property, Source: FromClusterProperty}
		}
		id := ClusterIdentity{ID: configured, Source: FromOptions, Warning: fmt.Sprintf("ignoring ClusterProperty %s: %v", clusterid.PropertyName, err)}
		if configured == "" {
			id.Source = NoClusterID
		}
		return id
	}
	if configured != "" {
		return ClusterIdentity{ID: configured, Source: FromOptions}
	}
	return ClusterIdentity{Source: NoClusterID}
}

// watchClusterProperty registers the handler that follows the ClusterProperty. Without its
// CRD, or without the RBAC to read it, the agent keeps the configured id and says so; a CRD
// installed later is picked up by a restart.
func (a *Agent) watchClusterProperty(ctx context.Context) (toolscache.ResourceEventHandlerRegistration, error) {
	if a.opts.APIReader != nil {
		// One read first: an informer the agent may not list never syncs, and the agent would
		// never program anything. A missing grant is a fallback, not a hang.
		_, err := clusterid.Read(ctx, a.opts.APIReader)
		switch {
		case meta.IsNoMatchError(err):
			a.propertyNote = "the ClusterProperty CRD (about.k8s.io) is not installed; a restart picks it up once it is"
			return nil, nil
		case apierrors.IsForbidden(err):
			a.propertyNote = "the agent may not read ClusterProperties: grant get, list and watch on clusterproperties.about.k8s.io"
			a.log.Error(err, "cannot read the ClusterProperty "+clusterid.PropertyName)
			return nil, nil
		case err != nil:
			// Transient (the API server busy or not reachable yet): the watch retries on its own.
			a.log.Error(err, "reading the ClusterProperty "+clusterid.PropertyName+" failed; watching it anyway")
		}
	}
	property := &unstructured.Unstructured{}
	property.SetGroupVersionKind(clusterid.GroupVersionKind)
	inf, err := a.informers.GetInformer(ctx, property, cache.BlockUntilSynced(false))
	if meta.IsNoMatchError(err) {
		a.propertyNote = "the ClusterProperty CRD (about.k8s.io) is not installed; a restart picks it up once it is"
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("watching ClusterProperties: %w", err)
	}
	a.setProperty(propertyAbsent, "")
	return inf.AddEventHandler(handler(a.onClusterProperty))
}

func (a *Agent) onClusterProperty(old, p *unstructured.Unstructured) {
	seen := p
	if seen == nil {
		seen = old
	}
	if seen.GetName() != clusterid.PropertyName {
		return
	}
	if p == nil {
		a.setProperty(propertyAbsent, "")
		return
	}
	value, _, _ := unstructured.NestedString(p.Object, "spec", "value")
	a.setProperty(propertyPresent, value)
}

// setProperty records what the watch saw and, once the initial lists are in, applies it.
func (a *Agent) setProperty(state propertyState, value string) {
	a.mu.Lock()
	a.property, a.propertyValue = state, value
	started := a.identityLogged
	a.mu.Unlock()
	if started {
		a.applyClusterIdentity()
	}
}

// applyClusterIdentity resolves the id from what is known now, hands it to the store (which
// converts every Service again when it changed) and logs it when it differs from the last one.
func (a *Agent) applyClusterIdentity() ClusterIdentity {
	a.mu.Lock()
	id := ResolveClusterID(a.propertyValue, a.property == propertyPresent, a.opts.ClusterID)
	changed := !a.identityLogged || id != a.identity
	a.identity, a.identityLogged = id, true
	note := a.propertyNote
	a.mu.Unlock()
	if changed {
		// Logged before the store converts under the new id: whoever sees the new endpoints
		// also finds the line that explains them.
		a.logClusterIdentity(id, note)
	}
	a.store.setCluster(id.ID)
	return id
}

func (a *Agent) logClusterIdentity(id ClusterIdentity, note string) {
	if id.Warning != "" {
		a.log.Info("cluster id: "+id.Warning, "clusterID", id.ID, "source", id.Source)
	}
	switch id.Source {
	case FromClusterProperty:
		a.log.Info("cluster id from ClusterProperty "+clusterid.PropertyName, "clusterID", id.ID, "source", id.Source)
	case FromOptions:
		a.log.Info("cluster id from the configured --cluster-id: no usable ClusterProperty "+clusterid.PropertyName, "clusterID", id.ID, "source", id.Source, "note", note)
	default:
		a.log.Info("no cluster id (no ClusterProperty "+clusterid.PropertyName+" and no --cluster-id): imports of PreferSameCluster Services spread over every cluster",
			"source", id.Source, "note", note)
	}
}

// ClusterIdentity returns the cluster id the agent follows now, and where it came from.
func (a *Agent) ClusterIdentity() ClusterIdentity {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.identity
}
