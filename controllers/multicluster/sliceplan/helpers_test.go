package sliceplan

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// localSlice builds a slice as the local EndpointSlice controller would write it.
func localSlice(namespace, service, name string, ips ...string) discoveryv1.EndpointSlice {
	s := discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace,
			Name:      name,
			Labels: map[string]string{
				discoveryv1.LabelServiceName: service,
				discoveryv1.LabelManagedBy:   "endpointslice-controller.fleetslice.io",
			},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: service, UID: "uid-1"}},
			ResourceVersion: "17",
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	for i, ip := range ips {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{ip},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
			Hostname:   ptr.To(fmt.Sprintf("pod-%d", i)),
			NodeName:   ptr.To(fmt.Sprintf("node-%d", i)),
			Zone:       ptr.To([]string{"zone-a", "zone-b"}[i%2]),
			Hints:      &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: []string{"zone-a", "zone-b"}[i%2]}}},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Name: fmt.Sprintf("pod-%d", i), Namespace: namespace},
		})
	}
	return s
}
