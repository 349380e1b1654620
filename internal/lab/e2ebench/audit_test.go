package e2ebench

import (
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/fleetslice/fleetslice/controllers/endpointslice"
	"github.com/fleetslice/fleetslice/internal/lab/localset"
)

// auditLine is an event as kube-apiserver logs it with the localset policy (Metadata level).
func auditLine(verb, resource, ns, userAgent string, code int, at string) string {
	return `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"x","stage":"ResponseComplete",` +
		`"requestURI":"/apis/discovery.k8s.io/v1/namespaces/` + ns + `/` + resource + `","verb":"` + verb + `",` +
		`"user":{"username":"admin"},"userAgent":"` + userAgent + `",` +
		`"objectRef":{"resource":"` + resource + `","namespace":"` + ns + `","apiGroup":"discovery.k8s.io","apiVersion":"v1"},` +
		`"responseStatus":{"metadata":{},"code":` + strconv.Itoa(code) + `},` +
		`"requestReceivedTimestamp":"` + at + `","stageTimestamp":"` + at + `"}` + "\n"
}

const (
	fsAgent  = "manager/v0.0.0 (linux/amd64) kubernetes/$Format"
	kcmAgent = "kube-controller-manager/v1.37.2 (linux/amd64) kubernetes/abc/system:serviceaccount:kube-system:endpointslice-controller"
)

func TestAuditTailCountsEachSidesWritesFromWhereItWasOpened(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	tail, err := tailAudit(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := tail.next(); err != nil || len(got) != 0 {
		t.Fatalf("a log not yet written gave %v, %v", got, err)
	}
	old := auditLine("update", "endpointslices", workloadNamespace, fsAgent, 200, "2026-12-03T07:00:00.000000Z")
	if err := os.WriteFile(path, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	// A tail opened now must not see what was logged before.
	tail, err = tailAudit(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lines := auditLine("create", "endpointslices", workloadNamespace, fsAgent, 201, "2026-12-03T07:00:01.000000Z") +
		auditLine("update", "endpointslices", workloadNamespace, kcmAgent, 409, "2026-12-03T07:00:01.200000Z") +
		auditLine("update", "endpointslices", workloadNamespace, kcmAgent, 200, "2026-12-03T07:00:01.700000Z") +
		auditLine("deletecollection", "endpointslices", workloadNamespace, kcmAgent, 200, "2026-12-03T07:00:02.100000Z") +
		auditLine("update", "pods", workloadNamespace, kcmAgent, 200, "2026-12-03T07:00:02.000000Z") +
		auditLine("update", "endpointslices", "kube-system", "kubectl/v1.37.2", 200, "2026-12-03T07:00:02.000000Z")
	// The last event is cut in the middle, as a read may find it while the API server writes.
	partial := auditLine("delete", "endpointslices", workloadNamespace, fsAgent, 200, "2026-12-03T07:00:03.000000Z")
	if _, err := f.WriteString(lines + partial[:40]); err != nil {
		t.Fatal(err)
	}
	got, err := tail.next()
	if err != nil {
		t.Fatal(err)
	}
	if n := len(got); n != 5 {
		t.Fatalf("got %d EndpointSlice writes, want 5 (no pod write, no half line): %+v", n, got)
	}
	if fs, kcm := countWrites(writesOf(got, "manager/")), countWrites(writesOf(got, "kube-controller-manager/")); !reflect.DeepEqual(fs, map[string]int{"create": 1}) ||
		!reflect.DeepEqual(kcm, map[string]int{"update": 2, "conflict": 1, "delete": 1}) {
		t.Fatalf("fleetslice %v, kube-controller-manager %v", fs, kcm)
	}
	if _, err := f.WriteString(partial[40:]); err != nil {
		t.Fatal(err)
	}
	if got, err = tail.next(); err != nil || len(got) != 1 || got[0].verb != "delete" {
		t.Fatalf("the finished line gave %+v, %v", got, err)
	}
	if _, err := f.WriteString("not json\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := tail.next(); err == nil {
		t.Fatal("a line that is not an audit event was accepted")
	}
}

func TestWritesOutsideBothSidesAreReported(t *testing.T) {
	sides := []Side{{userAgent: "manager/"}, {userAgent: "kube-controller-manager/"}}
	writes := []auditWrite{
		{namespace: workloadNamespace, userAgent: fsAgent},
		{namespace: workloadNamespace, userAgent: kcmAgent},
		{namespace: "elsewhere", userAgent: "kubectl/v1.37.2"},
	}
	if got := unattributed(writes, sides); len(got) != 0 {
		t.Fatalf("got %v for writes both sides made", got)
	}
	writes = append(writes, auditWrite{namespace: workloadNamespace, userAgent: "kubectl/v1.37.2"})
	if got := unattributed(writes, sides); !reflect.DeepEqual(got, []string{"kubectl/v1.37.2"}) {
		t.Fatalf("got %v", got)
	}
}

func TestTimelineIsCumulativeAndEndsAtTheEnd(t *testing.T) {
	start := time.Date(2026, 12, 3, 7, 0, 0, 0, time.UTC)
	writes := []auditWrite{{at: start.Add(100 * time.Millisecond)}, {at: start.Add(600 * time.Millisecond)}, {at: start.Add(700 * time.Millisecond)}, {at: start.Add(2 * time.Second)}}
	got := timeline(writes, start, 1200*time.Millisecond)
	want := []WritePoint{{0, 0}, {500 * time.Millisecond, 1}, {time.Second, 3}, {1200 * time.Millisecond, 3}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestCountEndpointsCountsOnlyTheSidesSlices(t *testing.T) {
	slice := func(managedBy string, ready ...bool) discoveryv1.EndpointSlice {
		s := discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{discoveryv1.LabelManagedBy: managedBy}}}
		for i, r := range ready {
			s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.0.0." + strconv.Itoa(i)}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(r)}})
		}
		return s
	}
	list := []discoveryv1.EndpointSlice{
		slice(endpointslice.ManagedBy, true, true), slice(endpointslice.ManagedBy, true),
		slice(endpointslice.UpstreamManagedBy, true, false, true),
	}
	if n, ready, others, addrs := countEndpoints(list, endpointslice.ManagedBy); n != 2 || ready != 3 || others != 0 || addrs != 2 {
		t.Fatalf("fleetslice: %d slices, %d ready, %d others, %d addresses", n, ready, others, addrs)
	}
	if n, ready, others, addrs := countEndpoints(list, endpointslice.UpstreamManagedBy); n != 1 || ready != 2 || others != 1 || addrs != 3 {
		t.Fatalf("upstream: %d slices, %d ready, %d others, %d addresses", n, ready, others, addrs)
	}
}

func TestNewComparisonRefusesAMemberNotInTheSet(t *testing.T) {
	cs := &localset.ClusterSet{Members: []string{"cluster-1", "cluster-2"}}
	if _, err := NewComparison(cs, "cluster-3", "", "http://127.0.0.1:1/metrics", Options{}); err == nil {
		t.Fatal("NewComparison accepted a cluster outside the set")
	}
	if _, err := NewComparison(cs, "cluster-1", "cluster-1", "http://127.0.0.1:1/metrics", Options{}); err == nil {
		t.Fatal("NewComparison accepted the compared cluster as its own baseline")
	}
}
