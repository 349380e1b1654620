package multicluster

import (
	"flag"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/fleetslice/fleetslice/api/v1alpha1"
	"github.com/fleetslice/fleetslice/controllers/multicluster/locality"
	"github.com/fleetslice/fleetslice/controllers/multicluster/names"
)

func TestOptionsDefaultsAndValidation(t *testing.T) {
	enabled := func(change func(*Options)) Options {
		o := DefaultOptions()
		o.BrokerConfig = &rest.Config{}
		if change != nil {
			change(&o)
		}
		return o
	}
	if err := enabled(nil).Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	if got := enabled(nil).renewEvery(); got != DefaultLeaseDuration/3 {
		t.Fatalf("renew every %s by default, want a third of the lease", got)
	}
	tests := []struct {
		name   string
		change func(*Options)
		want   string
	}{
		{"no broker", func(o *Options) { o.BrokerConfig = nil }, "no broker config"},
		{"sub-second lease", func(o *Options) { o.LeaseDuration = 500 * time.Millisecond }, "resolution"},
		{"renewing slower than the lease", func(o *Options) { o.LeaseDuration, o.RenewInterval = 3*time.Second, 3*time.Second }, "renew interval"},
		{"no workers", func(o *Options) { o.MaxConcurrentReconciles = 0 }, "concurrent"},
		{"limited broker QPS without a burst", func(o *Options) { o.BrokerQPS, o.BrokerBurst = 10, -1 }, "broker burst"},
		{"a broker QPS of 0", func(o *Options) { o.BrokerQPS = 0 }, "broker QPS 0"},
		{"negative credentials warning", func(o *Options) { o.CredentialsWarning = -time.Hour }, "credentials warning"},
		{"negative credentials check interval", func(o *Options) { o.CredentialsCheckInterval = -time.Second }, "check interval"},
		{"negative broker outage grace", func(o *Options) { o.BrokerOutageGrace = -time.Second }, "outage grace"},
		{"negative reconnect probe interval", func(o *Options) { o.ReconnectProbeInterval = -time.Second }, "reconnect probe interval"},
		{"an options literal without the defaults", func(o *Options) { *o = Options{BrokerConfig: &rest.Config{}} }, "lease duration"},
		{"an overload threshold out of range", func(o *Options) { o.Locality.OverloadThreshold = 11 }, "--topology-overload-threshold"},
		{"an unknown cluster selection", func(o *Options) { o.ClusterSelection = "nearest" }, "--cluster-selection"},
	}
	for _, tc := range tests {
		err := enabled(tc.change).Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error about %q", tc.name, err, tc.want)
		}
	}
}

func TestBindFlags(t *testing.T) {
	opts := DefaultOptions()
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	opts.BindFlags(fs)
	if opts.Enabled() {
		t.Fatal("no broker given, yet enabled")
	}
	err := fs.Parse([]string{"--cluster-id=east", "--broker-kubeconfig=/k", "--cluster-lease-duration=9s", "--leave-on-shutdown",
		"--broker-api-qps=-1", "--broker-api-burst=7", "--broker-credentials-warning=240h", "--broker-credentials-check-interval=10s"})
	if err != nil {
		t.Fatal(err)
	}
	if !opts.Enabled() || opts.ClusterID != "east" || opts.LeaseDuration != 9*time.Second || opts.renewEvery() != 3*time.Second || !opts.LeaveOnShutdown ||
		opts.BrokerQPS != -1 || opts.BrokerBurst != 7 || opts.CredentialsWarning != 240*time.Hour || opts.CredentialsCheckInterval != 10*time.Second {
		t.Fatalf("parsed %+v", opts)
	}
	if err := opts.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestTrustworthy(t *testing.T) {
	record := func(label, specCluster, ns, name string) *v1alpha1.ServiceExportRecord {
		return &v1alpha1.ServiceExportRecord{
			ObjectMeta: metav1.ObjectMeta{Labels: names.RecordLabels(label, "shop", "web")},
			Spec:       v1alpha1.ServiceExportRecordSpec{ClusterID: specCluster, ServiceNamespace: ns, ServiceName: name},
		}
	}
	if !trustworthy(record("a", "a", "shop", "web")) {
		t.Fatal("a consistent record is trusted")
	}
	for _, r := range []*v1alpha1.ServiceExportRecord{
		record("a", "b", "shop", "web"),
		record("a", "a", "other", "web"),
		record("a", "a", "shop", "api"),
		{Spec: v1alpha1.ServiceExportRecordSpec{ClusterID: "a"}},
	} {
		if trustworthy(r) {
			t.Fatalf("record %+v speaks for something its labels do not say", r)
		}
	}
}

func TestValidateLeaderElection(t *testing.T) {
	// controller-runtime's leader election defaults: a 15 s Lease, retried every 2 s.
	defaults := DefaultOptions()
	if got := defaults.LeaderHandOver(15*time.Second, 2*time.Second); got != 29*time.Second {
		t.Fatalf("hand-over at the defaults = %s, want 29s (10s renew interval + 15s + 2 × 2s)", got)
	}
	for _, tc := range []struct {
		name               string
		clusterLease       time.Duration
		leaderLease, retry time.Duration
		wantErr            bool
	}{
		{"both at their defaults", 0, 15 * time.Second, 2 * time.Second, false},
		{"a short cluster lease with the default leader election", 10 * time.Second, 15 * time.Second, 2 * time.Second, true},
		{"a short cluster lease with a quick leader election", 10 * time.Second, 3 * time.Second, 500 * time.Millisecond, false},
		{"a hand-over exactly as long as the cluster lease", 9 * time.Second, 4 * time.Second, 1 * time.Second, true},
	} {
		opts := DefaultOptions()
		if tc.clusterLease != 0 {
			opts.LeaseDuration = tc.clusterLease
		}
		err := opts.ValidateLeaderElection(tc.leaderLease, tc.retry)
		if (err != nil) != tc.wantErr {
			t.Errorf("%s: %v, want an error: %t", tc.name, err, tc.wantErr)
		}
		if err != nil && !strings.Contains(err.Error(), "--cluster-lease-duration") {
			t.Errorf("%s: the error should name the flag to change: %v", tc.name, err)
		}
	}
}

// The import controller follows the member's --topology-overload-threshold and
// --cluster-selection (cmd/manager's flag test shows the flags land in Options).
func TestImportReconcilerTakesItsOptions(t *testing.T) {
	opts := DefaultOptions()
	opts.ClusterSelection = locality.SelectionFirstReady
	opts.Locality = locality.ForThreshold(0.4)
	r := newImportReconciler(opts, "east", nil, nil, nil, nil)
	if r.selection != locality.SelectionFirstReady || r.locality != opts.Locality || r.self != "east" {
		t.Fatalf("reconciler selection %q, locality %+v", r.selection, r.locality)
	}
}
