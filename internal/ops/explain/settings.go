package explain

import (
	"fmt"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/fleetslice/fleetslice/controllers/endpointslice/placement"
	"github.com/fleetslice/fleetslice/controllers/endpointslice/selection"
	"github.com/fleetslice/fleetslice/controllers/multicluster/locality"
	"github.com/fleetslice/fleetslice/controllers/topology"
)

// Settings are the manager flags the decisions depend on. explain reads them from the manager's
// Deployment when it can, because a threshold or slice size set there changes every answer.
type Settings struct {
	// OverloadThreshold is --topology-overload-threshold: zone hints and the cross-cluster
	// allocation both keep every endpoint within (1+threshold) of its fair share.
	OverloadThreshold float64
	// MinEndpointsPerZone is --topology-min-endpoints-per-zone: hints turn on at this many ready
	// endpoints per zone.
	MinEndpointsPerZone int
	// MaxEndpointsPerSlice is --max-endpoints-per-slice; CompactionSlack is
	// --endpointslice-compaction-slack, the extra slices tolerated before compaction.
	MaxEndpointsPerSlice int
	CompactionSlack      int
	// Services is --endpointslice-services: "all" or "opted-in".
	Services selection.Scope
	// ClusterSelection is --cluster-selection: how imports with cluster selectors follow
	// their tiers, "bounded" or "first-ready".
	ClusterSelection locality.Selection
	// Source says where the values come from, for the reader to judge them.
	Source string
}

// DefaultSettings are the manager's flag defaults, taken from the constants the controller's
// DefaultOptions is built from (in the pure packages they tune, so that the plugin links no
// reconciler) so the two cannot drift apart.
func DefaultSettings() Settings {
	t := topology.DefaultOptions()
	return Settings{
		OverloadThreshold:    t.OverloadThreshold,
		MinEndpointsPerZone:  t.MinEndpointsPerZone,
		MaxEndpointsPerSlice: placement.DefaultMaxEndpointsPerSlice,
		CompactionSlack:      placement.DefaultCompactionSlack,
		Services:             selection.ScopeAll,
		ClusterSelection:     locality.SelectionBounded,
		Source:               "the manager's defaults",
	}
}

// managerCommand is the manager binary's path in its image (config/manager, the Helm chart).
const managerCommand = "/manager"

// ManagerContainer finds the manager's container in a Deployment: the one running /manager, or
// failing that the one named manager.
func ManagerContainer(d *appsv1.Deployment) (args []string, ok bool) {
	for _, c := range d.Spec.Template.Spec.Containers {
		if len(c.Command) > 0 && c.Command[0] == managerCommand {
			return append(c.Command[1:len(c.Command):len(c.Command)], c.Args...), true
		}
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == "manager" {
			return c.Args, true
		}
	}
	return nil, false
}

// SettingsFromArgs applies the manager's command-line flags to the defaults. Flags explain does
// not need are skipped; a value that does not parse is reported and the default kept, since the
// manager would have refused to start with it and the Deployment is then not what runs.
func SettingsFromArgs(args []string, source string) (Settings, []string) {
	s := DefaultSettings()
	s.Source = source
	var problems []string
	for i := 0; i < len(args); i++ {
		name, value, hasValue := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		if !strings.HasPrefix(args[i], "-") {
			continue
		}
		if !hasValue && i+1 < len(args) && knownFlag(name) {
			value, i = args[i+1], i+1
		}
		if err := s.set(name, value); err != nil {
			problems = append(problems, fmt.Sprintf("--%s=%s: %v", name, value, err))
		}
	}
	return s, problems
}

func knownFlag(name string) bool {
	switch name {
	case "topology-overload-threshold", "topology-min-endpoints-per-zone", "max-endpoints-per-slice",
		"endpointslice-compaction-slack", "endpointslice-services", "cluster-selection":
		return true
	}
	return false
}

func (s *Settings) set(name, value string) error {
	next := *s
	var err error
	switch name {
	case "topology-overload-threshold":
		next.OverloadThreshold, err = strconv.ParseFloat(value, 64)
	case "topology-min-endpoints-per-zone":
		next.MinEndpointsPerZone, err = strconv.Atoi(value)
	case "max-endpoints-per-slice":
		next.MaxEndpointsPerSlice, err = strconv.Atoi(value)
	case "endpointslice-compaction-slack":
		next.CompactionSlack, err = strconv.Atoi(value)
	case "endpointslice-services":
		err = next.Services.Set(value)
	case "cluster-selection":
		next.ClusterSelection = locality.Selection(value)
		err = next.ClusterSelection.Validate()
	}
	if err == nil {
		*s = next
	}
	return err
}
