// Package importplan decides, without client calls, what a member materialises for one
// ServiceImport: Plan turns what one sync read into every write it makes (the ServiceImport, the
// derived ClusterIP Service of a ClusterSetIP import with its cross-cluster allocation, the
// imported slices), and ImportSpec and ImportStatus decide the last two writes from the derived
// Service's cluster IPs, which become the ServiceImport's spec.ips.
package importplan

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/controllers/multicluster/names"
)

const (
	// defaultAffinityTimeout is what the API server fills in for ClientIP affinity without a
	// config; the desired Service carries it so that it does not differ from the stored one.
	defaultAffinityTimeout = int32(10800)
)

// FamilyAttempt is one way of asking for the derived Service's IP families.
type FamilyAttempt struct {
	Families []corev1.IPFamily
	Policy   *corev1.IPFamilyPolicy
}

// FamilyAttempts lists the ways to ask for the import's families, best first: all of them
// (preferring dual-stack when there are two), then each one alone for a cluster that does not
// serve the other. With no families given, the cluster's default family is used.
func FamilyAttempts(families []corev1.IPFamily) []FamilyAttempt {
	switch len(families) {
	case 0:
		return []FamilyAttempt{{}}
	case 1:
		return []FamilyAttempt{{Families: slices.Clone(families), Policy: ptr.To(corev1.IPFamilyPolicySingleStack)}}
	}
	attempts := []FamilyAttempt{{Families: slices.Clone(families[:2]), Policy: ptr.To(corev1.IPFamilyPolicyPreferDualStack)}}
	for _, f := range families[:2] {
		attempts = append(attempts, FamilyAttempt{Families: []corev1.IPFamily{f}, Policy: ptr.To(corev1.IPFamilyPolicySingleStack)})
	}
	return attempts
}

// DerivedService returns the derived Service to create for a ClusterSetIP import. It has no
// owner: its name and label bind it to the import (names.ImportOfDerived), so that it can be
// created before the ServiceImport, which is then created with the Service's IPs at once.
func DerivedService(namespace, name string, spec mcsv1beta1.ServiceImportSpec, attempt FamilyAttempt) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace,
			Name:      names.DerivedServiceName(namespace, name),
			Labels:    map[string]string{mcsv1beta1.LabelServiceName: name},
		},
		Spec: corev1.ServiceSpec{
			Type:           corev1.ServiceTypeClusterIP,
			IPFamilies:     slices.Clone(attempt.Families),
			IPFamilyPolicy: attempt.Policy,
		},
	}
	setManagedSpec(&svc.Spec, spec)
	return svc
}

// UpdateDerived sets the managed fields of an existing derived Service to what spec asks for
// and reports whether anything changed. IP families are left alone: see NeedsRecreate. The
// ServiceImport's owner reference, which derived Services carried before they were bound by
// name, goes: with it, deleting the ServiceImport would garbage-collect the ClusterSetIP.
func UpdateDerived(existing *corev1.Service, name string, spec mcsv1beta1.ServiceImportSpec) bool {
	want := existing.DeepCopy()
	setManagedSpec(&want.Spec, spec)
	if want.Labels == nil {
		want.Labels = map[string]string{}
	}
	want.Labels[mcsv1beta1.LabelServiceName] = name
	want.OwnerReferences = slices.DeleteFunc(want.OwnerReferences, func(ref metav1.OwnerReference) bool {
		return ref.Kind == mcsv1beta1.ServiceImportKindName && strings.HasPrefix(ref.APIVersion, mcsv1beta1.GroupName+"/")
	})
	if len(want.OwnerReferences) == 0 {
		want.OwnerReferences = nil
	}
	if equality.Semantic.DeepEqual(want.Spec, existing.Spec) &&
		equality.Semantic.DeepEqual(want.Labels, existing.Labels) &&
		equality.Semantic.DeepEqual(want.OwnerReferences, existing.OwnerReferences) {
		return false
	}
	want.DeepCopyInto(existing)
	return true
}

// NeedsRecreate reports whether an existing derived Service serves a family the import no
// longer has, or another primary family. Families cannot be swapped in place, and recreating
// changes the ClusterSetIP, so a Service that serves a subset of the import's families (a
// single-stack cluster) is kept.
func NeedsRecreate(existing *corev1.Service, families []corev1.IPFamily) bool {
	if len(families) == 0 || len(existing.Spec.IPFamilies) == 0 {
		return false
	}
	if existing.Spec.IPFamilies[0] != families[0] && slices.Contains(existing.Spec.IPFamilies, families[0]) {
		return true
	}
	for _, f := range existing.Spec.IPFamilies {
		if !slices.Contains(families, f) {
			return true
		}
	}
	return false
}

func setManagedSpec(s *corev1.ServiceSpec, spec mcsv1beta1.ServiceImportSpec) {
	ports := make([]corev1.ServicePort, 0, len(spec.Ports))
	for _, p := range spec.Ports {
		protocol := p.Protocol
		if protocol == "" {
			protocol = corev1.ProtocolTCP
		}
		// Keep a port's node port if the cluster gave it one (it would not for ClusterIP).
		var nodePort int32
		for _, old := range s.Ports {
			if old.Name == p.Name && old.Port == p.Port && old.Protocol == protocol {
				nodePort = old.NodePort
			}
		}
		ports = append(ports, corev1.ServicePort{
			Name:        p.Name,
			Protocol:    protocol,
			AppProtocol: p.AppProtocol,
			Port:        p.Port,
			TargetPort:  intstr.FromInt32(p.Port),
			NodePort:    nodePort,
		})
	}
	s.Ports = ports
	s.Selector = nil
	s.SessionAffinity = corev1.ServiceAffinityNone
	s.SessionAffinityConfig = nil
	if spec.SessionAffinity == corev1.ServiceAffinityClientIP {
		s.SessionAffinity = corev1.ServiceAffinityClientIP
		s.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To(defaultAffinityTimeout)}}
		if c := spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
			s.SessionAffinityConfig.ClientIP.TimeoutSeconds = ptr.To(*c.ClientIP.TimeoutSeconds)
		}
	}
	s.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyCluster)
	if spec.InternalTrafficPolicy != nil && *spec.InternalTrafficPolicy != "" {
		s.InternalTrafficPolicy = ptr.To(*spec.InternalTrafficPolicy)
	}
	s.TrafficDistribution = nil
	if spec.TrafficDistribution != nil {
		s.TrafficDistribution = ptr.To(*spec.TrafficDistribution)
	}
}

// ClusterSetIPs returns the derived Service's cluster IPs as the ServiceImport's spec.ips: one
// per family, primary first.
func ClusterSetIPs(derived *corev1.Service) []string {
	if derived == nil {
		return nil
	}
	ips := derived.Spec.ClusterIPs
	if len(ips) == 0 && derived.Spec.ClusterIP != "" {
		ips = []string{derived.Spec.ClusterIP}
	}
	out := make([]string, 0, 2)
	for _, ip := range ips {
		if ip != "" && ip != corev1.ClusterIPNone && len(out) < 2 {
			out = append(out, ip)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// IsFamilyRejection reports whether an API error message says the cluster does not serve a
// requested IP family, so that the next FamilyAttempt is worth trying.
func IsFamilyRejection(message string) bool {
	return strings.Contains(message, "not configured on this cluster") ||
		strings.Contains(message, "not configured for dual-stack")
}
