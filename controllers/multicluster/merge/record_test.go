package merge

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/api/v1alpha1"
)

func exportOf(namespace, name string) *mcsv1beta1.ServiceExport {
	return &mcsv1beta1.ServiceExport{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, CreationTimestamp: metav1.NewTime(epoch)},
		Spec: mcsv1beta1.ServiceExportSpec{
			ExportedLabels:      map[string]string{"team": "shop"},
			ExportedAnnotations: map[string]string{"docs": "https://example.invalid/cart"},
		},
	}
}

func serviceOf(namespace, name string, edits ...func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{"not": "exported"}},
		Spec: corev1.ServiceSpec{
			Type:      corev1.ServiceTypeClusterIP,
			ClusterIP: "10.0.0.10",
			Ports: []corev1.ServicePort{
				{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intOrString(8080), AppProtocol: ptr.To("http")},
				{Name: "dns", Port: 53, NodePort: 30053},
			},
			SessionAffinity:       corev1.ServiceAffinityClientIP,
			SessionAffinityConfig: &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](300)}},
			IPFamilies:            []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol},
			InternalTrafficPolicy: ptr.To(corev1.ServiceInternalTrafficPolicyLocal),
			TrafficDistribution:   ptr.To(corev1.ServiceTrafficDistributionPreferClose),
		},
	}
	for _, edit := range edits {
		edit(s)
	}
	return s
}

func TestRecordFromServiceCopiesWhatMerges(t *testing.T) {
	export := exportOf("shop", "cart")
	service := serviceOf("shop", "cart")
	got, err := RecordFromService("east", export, service)
	if err != nil {
		t.Fatalf("RecordFromService: %v", err)
	}
	want := Record{
		ClusterID:               "east",
		ExportCreationTimestamp: metav1.NewTime(epoch),
		ServiceNamespace:        "shop",
		ServiceName:             "cart",
		Type:                    mcsv1beta1.ClusterSetIP,
		Ports: []mcsv1beta1.ServicePort{
			{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, AppProtocol: ptr.To("http")},
			{Name: "dns", Protocol: corev1.ProtocolTCP, Port: 53},
		},
		SessionAffinity:       corev1.ServiceAffinityClientIP,
		SessionAffinityConfig: service.Spec.SessionAffinityConfig,
		IPFamilies:            []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol},
		InternalTrafficPolicy: ptr.To(corev1.ServiceInternalTrafficPolicyLocal),
		TrafficDistribution:   ptr.To(corev1.ServiceTrafficDistributionPreferClose),
		ExportedLabels:        map[string]string{"team": "shop"},
		ExportedAnnotations:   map[string]string{"docs": "https://example.invalid/cart"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("record =\n%+v\nwant\n%+v", got, want)
	}

	// The record must not share memory with the objects it came from (they live in a cache).
	*service.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds = 1
	*service.Spec.Ports[0].AppProtocol = "changed"
	service.Spec.IPFamilies[0] = corev1.IPv4Protocol
	export.Spec.ExportedLabels["team"] = "changed"
	if *got.SessionAffinityConfig.ClientIP.TimeoutSeconds != 300 || *got.Ports[0].AppProtocol != "http" ||
		got.IPFamilies[0] != corev1.IPv6Protocol || got.ExportedLabels["team"] != "shop" {
		t.Fatalf("record aliases its sources: %+v", got)
	}
}

func TestRecordFromServiceTypes(t *testing.T) {
	tests := []struct {
		name       string
		edit       func(*corev1.Service)
		wantType   mcsv1beta1.ServiceImportType
		wantReason mcsv1beta1.ServiceExportConditionReason
	}{
		{name: "ClusterIP", edit: func(*corev1.Service) {}, wantType: mcsv1beta1.ClusterSetIP},
		{name: "NodePort", edit: func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort }, wantType: mcsv1beta1.ClusterSetIP},
		{name: "LoadBalancer", edit: func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeLoadBalancer }, wantType: mcsv1beta1.ClusterSetIP},
		{name: "type not yet defaulted", edit: func(s *corev1.Service) { s.Spec.Type = "" }, wantType: mcsv1beta1.ClusterSetIP},
		{name: "ClusterIP not yet allocated", edit: func(s *corev1.Service) { s.Spec.ClusterIP = "" }, wantType: mcsv1beta1.ClusterSetIP},
		{name: "headless", edit: func(s *corev1.Service) { s.Spec.ClusterIP = corev1.ClusterIPNone }, wantType: mcsv1beta1.Headless},
		{
			name: "ExternalName",
			edit: func(s *corev1.Service) {
				s.Spec.Type = corev1.ServiceTypeExternalName
				s.Spec.ExternalName = "example.invalid"
			},
			wantReason: mcsv1beta1.ServiceExportReasonInvalidServiceType,
		},
		{name: "unknown type", edit: func(s *corev1.Service) { s.Spec.Type = "Sideways" }, wantReason: mcsv1beta1.ServiceExportReasonInvalidServiceType},
		{
			name:       "Service being deleted",
			edit:       func(s *corev1.Service) { s.DeletionTimestamp = ptr.To(metav1.NewTime(epoch)) },
			wantReason: mcsv1beta1.ServiceExportReasonNoService,
		},
		{name: "Service of another name", edit: func(s *corev1.Service) { s.Name = "other" }, wantReason: mcsv1beta1.ServiceExportReasonNoService},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := RecordFromService("east", exportOf("shop", "cart"), serviceOf("shop", "cart", tc.edit))
			if tc.wantReason != "" {
				var exportErr *ExportError
				if !errors.As(err, &exportErr) || exportErr.Reason != tc.wantReason || exportErr.Message == "" {
					t.Fatalf("err = %v, want an ExportError with reason %s", err, tc.wantReason)
				}
				return
			}
			if err != nil || got.Type != tc.wantType {
				t.Fatalf("type = %q, err = %v; want %q", got.Type, err, tc.wantType)
			}
		})
	}
}

func TestRecordFromServiceBadArguments(t *testing.T) {
	var exportErr *ExportError
	_, err := RecordFromService("east", exportOf("shop", "cart"), nil)
	if !errors.As(err, &exportErr) || exportErr.Reason != mcsv1beta1.ServiceExportReasonNoService {
		t.Fatalf("missing Service: err = %v, want reason NoService", err)
	}
	if _, err := RecordFromService("east", nil, serviceOf("shop", "cart")); err == nil || errors.As(err, &exportErr) {
		t.Fatalf("missing export: err = %v, want a plain error", err)
	}
	if _, err := RecordFromService("", exportOf("shop", "cart"), serviceOf("shop", "cart")); err == nil || errors.As(err, &exportErr) {
		t.Fatalf("missing cluster id: err = %v, want a plain error", err)
	}
}

func TestRecordFromServiceDefaultsUnsetFields(t *testing.T) {
	service := serviceOf("shop", "cart", func(s *corev1.Service) {
		s.Spec.SessionAffinity = ""
		s.Spec.SessionAffinityConfig = nil
		s.Spec.Ports = nil
		s.Spec.IPFamilies = nil
		s.Spec.InternalTrafficPolicy = nil
		s.Spec.TrafficDistribution = nil
	})
	export := exportOf("shop", "cart")
	export.Spec = mcsv1beta1.ServiceExportSpec{}
	got, err := RecordFromService("east", export, service)
	if err != nil {
		t.Fatal(err)
	}
	if got.SessionAffinity != corev1.ServiceAffinityNone || got.Ports != nil || got.IPFamilies != nil ||
		got.InternalTrafficPolicy != nil || got.TrafficDistribution != nil || got.ExportedLabels != nil {
		t.Fatalf("record = %+v, want None affinity and nothing else set", got)
	}
	// Records made from Services agree with each other through Merge.
	other, _ := RecordFromService("west", export, service)
	if result := Merge([]Record{got, other}); len(result.Reasons) != 0 {
		t.Fatalf("two records of the same Service conflict: %v", result.Reasons)
	}
}

func intOrString(port int) intstr.IntOrString { return intstr.FromInt32(int32(port)) }

func TestRecordFromServiceReadsTheClusterPreference(t *testing.T) {
	for _, tc := range []struct {
		name, value string
		set         bool
		want        *string
	}{
		{name: "absent"},
		{name: "PreferSameCluster", value: "PreferSameCluster", set: true, want: ptr.To("PreferSameCluster")},
		{name: "empty means none", value: "", set: true},
		{name: "unknown values are carried", value: "PreferSameRegion", set: true, want: ptr.To("PreferSameRegion")},
		{name: "too long for the record is none", value: strings.Repeat("x", 254), set: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			export := exportOf("shop", "cart")
			if tc.set {
				export.Annotations = map[string]string{v1alpha1.AnnotationTrafficDistribution: tc.value}
			}
			got, err := RecordFromService("east", export, serviceOf("shop", "cart"))
			if err != nil {
				t.Fatalf("RecordFromService: %v", err)
			}
			if !reflect.DeepEqual(got.ClusterTrafficDistribution, tc.want) {
				t.Fatalf("clusterTrafficDistribution = %v, want %v", ptr.Deref(got.ClusterTrafficDistribution, "<nil>"), ptr.Deref(tc.want, "<nil>"))
			}
		})
	}
}

func TestRecordFromServiceRefusesMetadataNoImportCouldCarry(t *testing.T) {
	for _, tc := range []struct {
		name        string
		labels      map[string]string
		annotations map[string]string
		want        mcsv1beta1.ServiceExportConditionReason
	}{
		{name: "label value over 63 bytes", labels: map[string]string{"tier": strings.Repeat("v", 64)}, want: ReasonInvalidExportedLabels},
		{name: "label key with a space", labels: map[string]string{"a b": "c"}, want: ReasonInvalidExportedLabels},
		{name: "annotation key with a space", annotations: map[string]string{"a b": "c"}, want: ReasonInvalidExportedAnnotations},
		{name: "annotations over 256 KiB", annotations: map[string]string{"big": strings.Repeat("x", 256*1024)}, want: ReasonInvalidExportedAnnotations},
		{name: "at the limits", labels: map[string]string{"example.com/" + strings.Repeat("k", 63): strings.Repeat("v", 63)},
			annotations: map[string]string{"big": strings.Repeat("x", 200*1024)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			export := exportOf("shop", "cart")
			export.Spec.ExportedLabels, export.Spec.ExportedAnnotations = tc.labels, tc.annotations
			_, err := RecordFromService("east", export, serviceOf("shop", "cart"))
			var exportErr *ExportError
			if tc.want == "" {
				if err != nil {
					t.Fatalf("err = %v, want none", err)
				}
				return
			}
			if !errors.As(err, &exportErr) || exportErr.Reason != tc.want {
				t.Fatalf("err = %v, want reason %s", err, tc.want)
			}
			if len(exportErr.Message) > maxInvalidMessageBytes || exportErr.Message == "" {
				t.Fatalf("message of %d bytes: %q", len(exportErr.Message), exportErr.Message)
			}
		})
	}
}

// KEP-5939: selectors are read from the annotation, refused with InvalidClusterSelector when
// they do not parse or validate, and refused for a headless Service with InvalidServiceType.
func TestRecordFromServiceReadsClusterSelectors(t *testing.T) {
	const region = `[{"propertySelector":{"matchProperties":{"region.topology.k8s.io":"@SameAsImporter@"}}}]`
	for _, tc := range []struct {
		name, annotation string
		headless         bool
		wantReason       mcsv1beta1.ServiceExportConditionReason
		wantMessage      string
		wantSelectors    int
	}{
		{name: "the importer's region", annotation: region, wantSelectors: 1},
		{name: "empty means none", annotation: " ", wantSelectors: 0},
		{name: "an empty list means none", annotation: "[]", wantSelectors: 0},
		{name: "headless without selectors exports", annotation: "", headless: true},
		{name: "not JSON", annotation: "region", wantReason: ReasonInvalidClusterSelector, wantMessage: "not a JSON list of cluster selectors"},
		{name: "an empty propertySelector", annotation: `[{"propertySelector":{}}]`, wantReason: ReasonInvalidClusterSelector,
			wantMessage: "[0].propertySelector: Required value"},
		{name: "a headless Service", annotation: region, headless: true, wantReason: mcsv1beta1.ServiceExportReasonInvalidServiceType,
			wantMessage: "cluster selection applies only to ClusterSetIP Services"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			export := exportOf("shop", "cart")
			if tc.annotation != "" {
				export.Annotations = map[string]string{v1alpha1.AnnotationClusterSelectors: tc.annotation}
			}
			service := serviceOf("shop", "cart")
			if tc.headless {
				service.Spec.ClusterIP = corev1.ClusterIPNone
			}
			got, err := RecordFromService("east", export, service)
			if tc.wantReason != "" {
				var exportErr *ExportError
				if !errors.As(err, &exportErr) || exportErr.Reason != tc.wantReason || !strings.Contains(exportErr.Message, tc.wantMessage) {
					t.Fatalf("err = %v, want reason %s saying %q", err, tc.wantReason, tc.wantMessage)
				}
				return
			}
			if err != nil || len(got.ClusterSelectors) != tc.wantSelectors {
				t.Fatalf("selectors %+v, err %v; want %d", got.ClusterSelectors, err, tc.wantSelectors)
			}
		})
	}
}
