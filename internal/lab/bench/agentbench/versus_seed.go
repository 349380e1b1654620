package agentbench

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetslice/fleetslice/agent/dataplane"
)

// Seeding the bench's Services straight into etcd.
//
// kube-apiserver v1.37's ClusterIP allocator counts every IPAddress object in the cluster, twice,
// on each Service it creates (ipallocator.Allocator.Used, for its metrics), so creating N Services
// through the API costs O(N²): 1,000 took 5 s, 10,000 137 s and 50,000 about three quarters of an
// hour on two cores, which kept the 50,000-Service size out of every run. The bench therefore
// writes the objects a create would have left behind (the Service with its cluster IP, the
// IPAddress that allocates it, the EndpointSlice) straight into the API server's etcd in large
// transactions, and waits until the API server lists them all. Services with a NodePort go through
// the API first, while few addresses exist, so the NodePort allocator records their ports as it
// would in a real cluster. What the programs are measured on (the changes after the cold sync)
// goes through the API as before.

// etcdPrefix is kube-apiserver's default --etcd-prefix, which envtest keeps.
const etcdPrefix = "/registry"

// etcdTxnOps and etcdTxnBytes keep each transaction under etcd's defaults (--max-txn-ops 128,
// --max-request-bytes 1.5 MiB).
const (
	etcdTxnOps   = 100
	etcdTxnBytes = 1 << 20
)

// seeded is one object and the etcd key kube-apiserver keeps it under.
type seeded struct {
	key   string
	value []byte
}

// seedObjects are the etcd entries for svc without a NodePort: the Service with its cluster IP,
// the IPAddress that allocates the IP, and its EndpointSlice.
func seedObjects(svc dataplane.Service, changed time.Time) ([]seeded, error) {
	s, slice := kubeObjects(svc, changed)
	created := metav1.NewTime(changed.Truncate(time.Second))
	s.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}
	s.UID, s.CreationTimestamp = uuid.NewUUID(), created
	// What the API server's defaulting would have filled in on a create.
	s.Spec.ClusterIPs = []string{s.Spec.ClusterIP}
	s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
	s.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicySingleStack)
	s.Spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyCluster)
	if s.Spec.SessionAffinity == "" {
		s.Spec.SessionAffinity = corev1.ServiceAffinityNone
	}
	ip := &networkingv1.IPAddress{
		TypeMeta: metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "IPAddress"},
		ObjectMeta: metav1.ObjectMeta{Name: s.Spec.ClusterIP, UID: uuid.NewUUID(), CreationTimestamp: created,
			Labels: map[string]string{
				networkingv1.LabelIPAddressFamily: string(corev1.IPv4Protocol),
				// The API server's own allocator's name, so it counts and repairs these as its own.
				networkingv1.LabelManagedBy: "ipallocator.k8s.io",
			}},
		Spec: networkingv1.IPAddressSpec{ParentRef: &networkingv1.ParentReference{
			Resource: "services", Namespace: s.Namespace, Name: s.Name}},
	}
	slice.TypeMeta = metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"}
	slice.UID, slice.CreationTimestamp = uuid.NewUUID(), created
	var out []seeded
	for _, o := range []struct {
		key string
		obj any
	}{
		{etcdPrefix + "/services/specs/" + s.Namespace + "/" + s.Name, s},
		{etcdPrefix + "/ipaddresses/" + ip.Name, ip},
		{etcdPrefix + "/endpointslices/" + slice.Namespace + "/" + slice.Name, slice},
	} {
		// kube-apiserver stores core types as protobuf, and reads JSON as well (as it must after
		// a change of storage media type); JSON keeps the bench free of storage encoding.
		b, err := json.Marshal(o.obj)
		if err != nil {
			return nil, fmt.Errorf("encoding %s: %w", o.key, err)
		}
		out = append(out, seeded{key: o.key, value: b})
	}
	return out, nil
}

// etcdPut writes entries into etcd through its JSON gateway, in transactions of at most
// etcdTxnOps puts and about etcdTxnBytes.
func etcdPut(ctx context.Context, etcd *url.URL, entries []seeded) error {
	type put struct {
		Key   string `json:"key"`
		Value string `json:"value"`
	}
	type op struct {
		RequestPut put `json:"requestPut"`
	}
	endpoint := etcd.JoinPath("/v3/kv/txn").String()
	var batch []op
	size := 0
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		body, err := json.Marshal(map[string][]op{"success": batch})
		if err != nil {
			return err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return fmt.Errorf("writing %d objects to etcd: %w", len(batch), err)
		}
		defer func() { _ = resp.Body.Close() }()
		answer, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("writing %d objects to etcd: %s: %s", len(batch), resp.Status, answer)
		}
		batch, size = batch[:0], 0
		return nil
	}
	for _, e := range entries {
		if len(batch) == etcdTxnOps || size+len(e.value) > etcdTxnBytes {
			if err := flush(); err != nil {
				return err
			}
		}
		batch = append(batch, op{put{base64.StdEncoding.EncodeToString([]byte(e.key)), base64.StdEncoding.EncodeToString(e.value)}})
		size += len(e.key) + len(e.value)
	}
	return flush()
}

// seedServices writes services into etcd; awaitListed then waits for the API server to list them.
func seedServices(ctx context.Context, etcd *url.URL, services []dataplane.Service, changed time.Time) error {
	var entries []seeded
	for _, svc := range services {
		objs, err := seedObjects(svc, changed)
		if err != nil {
			return err
		}
		entries = append(entries, objs...)
	}
	return etcdPut(ctx, etcd, entries)
}

// seedTimeout bounds the wait for the API server to list what was seeded.
const seedTimeout = 5 * time.Minute

// awaitListed waits until the API server lists at least one Service and one EndpointSlice per
// entry of services in every namespace they are in. Given every Service of the namespaces, not
// only the seeded ones, the counts cannot be made up by Services created through the API.
func awaitListed(ctx context.Context, c client.Client, services []dataplane.Service) error {
	want := map[string]int{}
	for _, s := range services {
		want[s.Namespace]++
	}
	count := func(ctx context.Context, gvk schema.GroupVersionKind) (map[string]int, error) {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk)
		if err := c.List(ctx, list); err != nil {
			return nil, err
		}
		got := map[string]int{}
		for _, o := range list.Items {
			got[o.Namespace]++
		}
		return got, nil
	}
	var missing string
	err := wait.PollUntilContextTimeout(ctx, time.Second, seedTimeout, true, func(ctx context.Context) (bool, error) {
		for _, gvk := range []schema.GroupVersionKind{
			corev1.SchemeGroupVersion.WithKind("ServiceList"),
			discoveryv1.SchemeGroupVersion.WithKind("EndpointSliceList"),
		} {
			got, err := count(ctx, gvk)
			if err != nil {
				missing = err.Error()
				return false, nil
			}
			for ns, n := range want {
				if got[ns] < n {
					missing = fmt.Sprintf("%s in %s: %d of %d listed", gvk.Kind, ns, got[ns], n)
					return false, nil
				}
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the API server to list the seeded objects (%s): %w", missing, err)
	}
	return nil
}
