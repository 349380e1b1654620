package main

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fleetslice/fleetslice/controllers/apiclient"
	"github.com/fleetslice/fleetslice/controllers/endpointslice"
	"github.com/fleetslice/fleetslice/controllers/multicluster/locality"
)

// Every manager flag, set to a value other than its default, must land where its controller
// reads it; a flag added without a row here fails the test.
func TestEveryFlagReachesItsController(t *testing.T) {
	broker := filepath.Join(t.TempDir(), "broker.kubeconfig")
	if err := os.WriteFile(broker, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	rows := []struct {
		flag, value string
		landed      func(o *options) bool
	}{
		{"max-endpoints-per-slice", "50", func(o *options) bool { return o.slices.MaxEndpointsPerSlice == 50 }},
		{"endpoint-updates-batch-period", "3s", func(o *options) bool { return o.slices.BatchPeriod == 3*time.Second }},
		{"endpoint-updates-quiet-period", "50ms", func(o *options) bool { return o.slices.CoalesceQuiet == 50*time.Millisecond }},
		{"endpoint-updates-window", "300ms", func(o *options) bool { return o.slices.CoalesceWindow == 300*time.Millisecond }},
		{"endpoint-updates-max-delay", "2s", func(o *options) bool { return o.slices.CoalesceBudget == 2*time.Second }},
		{"kube-api-qps", "7", func(o *options) bool { return o.qps == 7 }},
		{"kube-api-burst", "9", func(o *options) bool { return o.burst == 9 }},
		{"concurrent-endpointslice-syncs", "2", func(o *options) bool { return o.slices.Concurrency == 2 }},
		{"endpointslice-compaction-slack", "3", func(o *options) bool { return o.slices.CompactionSlack == 3 }},
		{"endpointslice-services", "opted-in", func(o *options) bool { return o.slices.Services == endpointslice.ScopeOptedIn }},
		{"adopt-upstream-slices", "false", func(o *options) bool { return !o.slices.AdoptUpstreamSlices }},
		// One bound for both levels: the zone hints and the allocation across clusters.
		{"topology-overload-threshold", "0.4", func(o *options) bool {
			return o.slices.Topology.OverloadThreshold == 0.4 && o.mcs.Locality.OverloadThreshold == 0.4 && o.mcs.Locality.ReturnThreshold == 0.2
		}},
		{"topology-min-endpoints-per-zone", "5", func(o *options) bool { return o.slices.Topology.MinEndpointsPerZone == 5 }},
		{"cluster-id", "east", func(o *options) bool { return o.mcs.ClusterID == "east" }},
		{"broker-kubeconfig", broker, func(o *options) bool { return o.mcs.BrokerKubeconfig == broker && o.mcs.Enabled() }},
		{"broker-namespace", "fleet", func(o *options) bool { return o.mcs.BrokerNamespace == "fleet" }},
		{"cluster-lease-duration", "60s", func(o *options) bool { return o.mcs.LeaseDuration == time.Minute }},
		{"cluster-lease-renew-interval", "5s", func(o *options) bool { return o.mcs.RenewInterval == 5*time.Second }},
		{"leave-on-shutdown", "true", func(o *options) bool { return o.mcs.LeaveOnShutdown }},
		{"broker-api-qps", "-1", func(o *options) bool { return o.mcs.BrokerQPS == -1 }},
		{"broker-api-burst", "8", func(o *options) bool { return o.mcs.BrokerBurst == 8 }},
		{"broker-credentials-warning", "240h", func(o *options) bool { return o.mcs.CredentialsWarning == 240*time.Hour }},
		{"broker-credentials-check-interval", "10s", func(o *options) bool { return o.mcs.CredentialsCheckInterval == 10*time.Second }},
		{"multicluster-concurrent-reconciles", "6", func(o *options) bool { return o.mcs.MaxConcurrentReconciles == 6 }},
		{"broker-outage-grace", "30s", func(o *options) bool { return o.mcs.BrokerOutageGrace == 30*time.Second }},
		{"broker-reconnect-probe-interval", "1s", func(o *options) bool { return o.mcs.ReconnectProbeInterval == time.Second }},
		{"initial-exports-wait", "0s", func(o *options) bool { return o.mcs.InitialExportsWait == 0 }},
		// The KEP's default for cluster selectors instead of the bounded tiers; the import
		// controller reads it from the same Options (multicluster.TestImportReconcilerTakesItsOptions).
		{"cluster-selection", "first-ready", func(o *options) bool { return o.mcs.ClusterSelection == locality.SelectionFirstReady }},
		{"broker-kubeconfig-optional", "true", func(o *options) bool { return o.brokerOptional }},
		{"context", "member-a", func(o *options) bool { return o.kubeContext == "member-a" }},
		{"metrics-bind-address", ":9090", func(o *options) bool { return o.managerOptions().Metrics.BindAddress == ":9090" }},
		{"health-probe-bind-address", ":9091", func(o *options) bool { return o.managerOptions().HealthProbeBindAddress == ":9091" }},
		{"pprof-bind-address", "127.0.0.1:6060", func(o *options) bool { return o.managerOptions().PprofBindAddress == "127.0.0.1:6060" }},
		{"leader-elect", "true", func(o *options) bool { return o.managerOptions().LeaderElection }},
		{"leader-elect-lease-duration", "8s", func(o *options) bool { return *o.managerOptions().LeaseDuration == 8*time.Second }},
		{"leader-elect-renew-deadline", "6s", func(o *options) bool { return *o.managerOptions().RenewDeadline == 6*time.Second }},
		{"leader-elect-retry-period", "1s", func(o *options) bool { return *o.managerOptions().RetryPeriod == time.Second }},
		{"leader-election-namespace", "ops", func(o *options) bool { return o.managerOptions().LeaderElectionNamespace == "ops" }},
		{"version", "true", func(o *options) bool { return o.printVersion }},
	}
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	o := bindFlags(fs)
	covered := map[string]bool{}
	var args []string
	for _, r := range rows {
		f := fs.Lookup(r.flag)
		if f == nil {
			t.Fatalf("no flag --%s", r.flag)
		}
		if f.DefValue == r.value && r.flag != "adopt-upstream-slices" {
			t.Fatalf("--%s=%s is its default; the row proves nothing", r.flag, r.value)
		}
		covered[r.flag] = true
		args = append(args, "--"+r.flag+"="+r.value)
	}
	fs.VisitAll(func(f *flag.Flag) {
		if !covered[f.Name] {
			t.Errorf("--%s has no row: show where it lands", f.Name)
		}
	})
	// adopt-upstream-slices is refused with opted-in Services; its own row sets it below.
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	if _, err := o.complete(); err != nil {
		t.Fatalf("complete: %v", err)
	}
	for _, r := range rows {
		if !r.landed(o) {
			t.Errorf("--%s=%s did not reach its controller", r.flag, r.value)
		}
	}
	adopt, err := parse("--adopt-upstream-slices")
	if err != nil || !adopt.slices.AdoptUpstreamSlices {
		t.Errorf("--adopt-upstream-slices: %v, adopting %t", err, adopt.slices.AdoptUpstreamSlices)
	}
}

func parse(args ...string) (*options, error) {
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	o := bindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	_, err := o.complete()
	return o, err
}

// An unknown --cluster-selection is refused where the flags are parsed, naming the values.
func TestClusterSelectionIsRefusedWhenUnknown(t *testing.T) {
	_, err := parse("--cluster-selection=nearest", "--broker-kubeconfig=/k")
	if err == nil || !strings.Contains(err.Error(), "cluster-selection") || !strings.Contains(err.Error(), "first-ready") {
		t.Fatalf("got %v, want a refusal naming the flag and its values", err)
	}
	o, err := parse("--broker-kubeconfig=/k")
	if err != nil || o.mcs.ClusterSelection != locality.SelectionBounded {
		t.Fatalf("default %q (%v), want bounded", o.mcs.ClusterSelection, err)
	}
}

// 0 means 0 at both levels, and a threshold out of range is refused with the flag's name.
func TestOverloadThresholdIsOneValue(t *testing.T) {
	o, err := parse("--topology-overload-threshold=0", "--broker-kubeconfig=/k")
	if err != nil {
		t.Fatal(err)
	}
	if o.slices.Topology.OverloadThreshold != 0 || o.mcs.Locality.OverloadThreshold != 0 {
		t.Fatalf("threshold 0 became %v for zones and %v across clusters", o.slices.Topology.OverloadThreshold, o.mcs.Locality.OverloadThreshold)
	}
	for _, bad := range []string{"-0.1", "11", "NaN"} {
		_, err := parse("--topology-overload-threshold="+bad, "--broker-kubeconfig=/k")
		if err == nil || !strings.Contains(err.Error(), "--topology-overload-threshold") || !strings.Contains(err.Error(), bad) {
			t.Errorf("threshold %s: %v, want a refusal naming the flag and value", bad, err)
		}
	}
}

func TestBrokerKubeconfigOptional(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "absent")
	o, err := parse("--broker-kubeconfig-optional", "--broker-kubeconfig="+missing)
	if err != nil {
		t.Fatal(err)
	}
	if o.mcs.Enabled() {
		t.Fatal("multi-cluster services on without a broker kubeconfig")
	}
}

func TestManagerRemembersMappings(t *testing.T) {
	got := (&options{}).managerOptions().MapperProvider
	if reflect.ValueOf(got).Pointer() != reflect.ValueOf(apiclient.MapperProvider).Pointer() {
		t.Error("the manager maps kinds with controller-runtime's dynamic mapper alone; every request walks every API group's mappings")
	}
}
