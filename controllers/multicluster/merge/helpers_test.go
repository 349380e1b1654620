package merge

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/api/v1alpha1"
)

var epoch = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// record returns a plain ClusterSetIP export of shop/cart made at epoch+second, changed by
// the given edits.
func record(cluster string, second int, edits ...func(*Record)) Record {
	r := Record{
		ClusterID:               cluster,
		ExportCreationTimestamp: metav1.NewTime(epoch.Add(time.Duration(second) * time.Second)),
		ServiceNamespace:        "shop",
		ServiceName:             "cart",
		Type:                    mcsv1beta1.ClusterSetIP,
		Ports:                   []mcsv1beta1.ServicePort{tcp("http", 80)},
		SessionAffinity:         corev1.ServiceAffinityNone,
		IPFamilies:              []corev1.IPFamily{corev1.IPv4Protocol},
		InternalTrafficPolicy:   ptr.To(corev1.ServiceInternalTrafficPolicyCluster),
	}
	for _, edit := range edits {
		edit(&r)
	}
	return r
}

func tcp(name string, port int32) mcsv1beta1.ServicePort {
	return mcsv1beta1.ServicePort{Name: name, Protocol: corev1.ProtocolTCP, Port: port}
}

func udp(name string, port int32) mcsv1beta1.ServicePort {
	return mcsv1beta1.ServicePort{Name: name, Protocol: corev1.ProtocolUDP, Port: port}
}

func withApp(p mcsv1beta1.ServicePort, app string) mcsv1beta1.ServicePort {
	p.AppProtocol = &app
	return p
}

func ports(p ...mcsv1beta1.ServicePort) func(*Record) {
	return func(r *Record) { r.Ports = p }
}

func headless(r *Record) { r.Type = mcsv1beta1.Headless }

func clientIPAffinity(timeout *int32) func(*Record) {
	return func(r *Record) {
		r.SessionAffinity = corev1.ServiceAffinityClientIP
		if timeout != nil {
			r.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: timeout}}
		}
	}
}

func labels(kv ...string) func(*Record) {
	return func(r *Record) { r.ExportedLabels = pairs(kv) }
}

func annotations(kv ...string) func(*Record) {
	return func(r *Record) { r.ExportedAnnotations = pairs(kv) }
}

func pairs(kv []string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

func trafficPolicy(p *corev1.ServiceInternalTrafficPolicy) func(*Record) {
	return func(r *Record) { r.InternalTrafficPolicy = p }
}

func distribution(d *string) func(*Record) {
	return func(r *Record) { r.TrafficDistribution = d }
}

func families(f ...corev1.IPFamily) func(*Record) {
	return func(r *Record) { r.IPFamilies = f }
}

func reasonsOf(result Result) []string {
	out := make([]string, len(result.Reasons))
	for i, r := range result.Reasons {
		out[i] = string(r)
	}
	return out
}

func clusterDistribution(d string) func(*Record) {
	return func(r *Record) {
		r.ClusterTrafficDistribution = nil
		if d != "" {
			r.ClusterTrafficDistribution = &d
		}
	}
}

// regionFirst selects the importer's region, then everything with a GPU.
var regionFirst = []v1alpha1.ClusterSelector{
	{PropertySelector: &v1alpha1.PropertySelector{MatchProperties: map[string]string{"region.topology.k8s.io": v1alpha1.SameAsImporter}}},
	{PropertySelector: &v1alpha1.PropertySelector{MatchExpressions: []v1alpha1.PropertySelectorRequirement{{Key: "gpu.example.com", Operator: "Exists"}}}},
}

// selectors sets a record's cluster selectors.
func selectors(list []v1alpha1.ClusterSelector) func(*Record) {
	return func(r *Record) { r.ClusterSelectors = list }
}
