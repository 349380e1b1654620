package hints

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestModeOf(t *testing.T) {
	cases := []struct {
		name        string
		annotations map[string]string
		td          *string
		want        Mode
		// source is a phrase the source must contain: it names what decided.
		source string
	}{
		{"nothing", nil, nil, None, "neither annotation " + AnnotationTopologyMode},
		{"annotation Auto", map[string]string{AnnotationTopologyMode: "Auto"}, nil, Auto, "annotation " + AnnotationTopologyMode + "=Auto"},
		{"annotation lower case", map[string]string{AnnotationTopologyMode: "auto"}, nil, Auto, AnnotationTopologyMode + "=auto"},
		{"deprecated annotation", map[string]string{AnnotationTopologyAwareHints: "Auto"}, nil, Auto, AnnotationTopologyAwareHints + "=Auto"},
		{"annotation wins over trafficDistribution", map[string]string{AnnotationTopologyMode: "Auto"},
			ptr.To(corev1.ServiceTrafficDistributionPreferSameNode), Auto, AnnotationTopologyMode},
		{"annotation Disabled leaves trafficDistribution", map[string]string{AnnotationTopologyMode: "Disabled"},
			ptr.To(corev1.ServiceTrafficDistributionPreferClose), PreferSameZone, "spec.trafficDistribution=PreferClose"},
		{"PreferSameZone", nil, ptr.To(corev1.ServiceTrafficDistributionPreferSameZone), PreferSameZone, "spec.trafficDistribution=PreferSameZone"},
		{"PreferSameNode", nil, ptr.To(corev1.ServiceTrafficDistributionPreferSameNode), PreferSameNode, "spec.trafficDistribution=PreferSameNode"},
		{"unknown trafficDistribution", nil, ptr.To("Elsewhere"), None, "neither"},
	}
	for _, tc := range cases {
		svc := &corev1.Service{}
		svc.Annotations = tc.annotations
		svc.Spec.TrafficDistribution = tc.td
		got, source := ModeOf(svc)
		if got != tc.want || !strings.Contains(source, tc.source) {
			t.Errorf("%s: ModeOf = %s from %q, want %s from %q", tc.name, got, source, tc.want, tc.source)
		}
	}
}
