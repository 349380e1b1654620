package merge

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

func TestMergePorts(t *testing.T) {
	tests := []struct {
		name         string
		records      []Record
		want         []mcsv1beta1.ServicePort
		wantConflict bool
		wantMessages map[string]string
	}{
		{
			name:         "different names and numbers add up, sorted by name, with PortConflict",
			records:      []Record{record("a", 0, ports(tcp("web", 80))), record("b", 1, ports(tcp("admin", 9000)))},
			want:         []mcsv1beta1.ServicePort{tcp("admin", 9000), tcp("web", 80)},
			wantConflict: true,
			wantMessages: map[string]string{
				"a": `ports: cluster "b" exports other ports than this export (the import offers the union`,
				"b": `ports: this export's ports differ from those of the oldest export (cluster "a") (the import offers the union of the ports that do not clash; each reaches only the clusters that export it)`,
			},
		},
		{
			name: "the conformance union: a shared port plus an SCTP port",
			records: []Record{
				record("a", 0, ports(tcp("http", 42))),
				record("b", 2, ports(tcp("http", 42), mcsv1beta1.ServicePort{Name: "stcp", Protocol: corev1.ProtocolSCTP, Port: 142})),
			},
			want:         []mcsv1beta1.ServicePort{tcp("http", 42), {Name: "stcp", Protocol: corev1.ProtocolSCTP, Port: 142}},
			wantConflict: true,
		},
		{
			name: "a newer export with fewer ports: the union is the oldest's, still PortConflict",
			records: []Record{
				record("a", 0, ports(tcp("http", 80), tcp("admin", 9000))),
				record("b", 1, ports(tcp("http", 80))),
				record("c", 2, ports(tcp("http", 80), tcp("admin", 9000))),
			},
			want:         []mcsv1beta1.ServicePort{tcp("admin", 9000), tcp("http", 80)},
			wantConflict: true,
			wantMessages: map[string]string{"c": `ports: cluster "b" exports other ports than the oldest export (cluster "a")`},
		},
		{
			name: "the same ports in another order agree",
			records: []Record{
				record("a", 0, ports(tcp("http", 80), udp("dns", 53))),
				record("b", 1, ports(udp("dns", 53), tcp("http", 80))),
			},
			want: []mcsv1beta1.ServicePort{udp("dns", 53), tcp("http", 80)},
		},
		{
			name:         "same name, another number: the oldest wins",
			records:      []Record{record("a", 0, ports(tcp("http", 80))), record("b", 1, ports(tcp("http", 81)))},
			want:         []mcsv1beta1.ServicePort{tcp("http", 80)},
			wantConflict: true,
			wantMessages: map[string]string{
				"b": `ports: this export's "http" TCP/81 clashes with "http" TCP/80 from cluster "a", which is used`,
				"a": `ports: cluster "b" exports other ports than this export, and cluster "b" has ports that clash with older exports' ports, which are left out`,
			},
		},
		{
			name:         "same name, another protocol",
			records:      []Record{record("a", 0, ports(udp("dns", 53))), record("b", 1, ports(tcp("dns", 53)))},
			want:         []mcsv1beta1.ServicePort{udp("dns", 53)},
			wantConflict: true,
		},
		{
			name: "same name and number, another appProtocol",
			records: []Record{
				record("a", 0, ports(withApp(tcp("web", 80), "http"))),
				record("b", 1, ports(withApp(tcp("web", 80), "kubernetes.io/h2c"))),
			},
			want:         []mcsv1beta1.ServicePort{withApp(tcp("web", 80), "http")},
			wantConflict: true,
			wantMessages: map[string]string{"b": `(appProtocol kubernetes.io/h2c) clashes with "web" TCP/80 (appProtocol http)`},
		},
		{
			name:         "another name for the same protocol and number: the oldest name wins",
			records:      []Record{record("a", 1, ports(tcp("http", 80))), record("b", 0, ports(tcp("web", 80)))},
			want:         []mcsv1beta1.ServicePort{tcp("web", 80)},
			wantConflict: true,
			wantMessages: map[string]string{"a": `this export's "http" TCP/80 clashes with "web" TCP/80 from cluster "b"`},
		},
		{
			name:         "one number over two protocols is two ports",
			records:      []Record{record("a", 0, ports(tcp("dns-tcp", 53))), record("b", 1, ports(udp("dns-udp", 53)))},
			want:         []mcsv1beta1.ServicePort{tcp("dns-tcp", 53), udp("dns-udp", 53)},
			wantConflict: true,
		},
		{
			name:    "unnamed single ports that agree",
			records: []Record{record("a", 0, ports(tcp("", 80))), record("b", 1, ports(tcp("", 80)))},
			want:    []mcsv1beta1.ServicePort{tcp("", 80)},
		},
		{
			name: "an unset protocol means TCP",
			records: []Record{
				record("a", 0, ports(mcsv1beta1.ServicePort{Name: "http", Port: 80})),
				record("b", 1, ports(tcp("http", 80))),
			},
			want: []mcsv1beta1.ServicePort{{Name: "http", Port: 80}},
		},
		{
			name:         "unnamed ports with different numbers clash by name",
			records:      []Record{record("a", 0, ports(tcp("", 80))), record("b", 1, ports(tcp("", 8080)))},
			want:         []mcsv1beta1.ServicePort{tcp("", 80)},
			wantConflict: true,
		},
		{
			name: "a port first brought by a newer export beats a still newer one",
			records: []Record{
				record("a", 0, ports(tcp("http", 80))),
				record("b", 1, ports(tcp("http", 80), tcp("grpc", 90))),
				record("c", 2, ports(tcp("http", 80), tcp("grpc", 91))),
			},
			want:         []mcsv1beta1.ServicePort{tcp("grpc", 90), tcp("http", 80)},
			wantConflict: true,
			wantMessages: map[string]string{
				"c": `this export's "grpc" TCP/91 clashes with "grpc" TCP/90 from cluster "b", which is used`,
				"a": `ports: clusters "b", "c" export other ports than this export, and cluster "c" has ports that clash`,
				"b": `ports: this export's ports differ from those of the oldest export (cluster "a"), and cluster "c" has ports that clash`,
			},
		},
		{
			name: "a losing port does not block a later export's port",
			records: []Record{
				record("a", 0, ports(tcp("http", 80))),
				record("b", 1, ports(tcp("http", 81))),
				record("c", 2, ports(tcp("alt", 81))),
			},
			want:         []mcsv1beta1.ServicePort{tcp("alt", 81), tcp("http", 80)},
			wantConflict: true,
		},
		{
			name: "duplicates inside one export are dropped without a conflict",
			records: []Record{
				record("a", 0, ports(tcp("http", 80), tcp("http", 81), tcp("web", 80))),
			},
			want: []mcsv1beta1.ServicePort{tcp("http", 80)},
		},
		{
			// A Service of several ports must name each: the union may not hold an unnamed
			// port beside another, or no derived Service could carry it.
			name: "an unnamed port keeps named ports of newer exports out",
			records: []Record{
				record("a", 0, ports(tcp("", 80))),
				record("b", 1, ports(tcp("http", 80), tcp("metrics", 9090))),
			},
			want:         []mcsv1beta1.ServicePort{tcp("", 80)},
			wantConflict: true,
			wantMessages: map[string]string{"b": `"metrics" TCP/9090 clashes with "" TCP/80 from cluster "a", which is used`},
		},
		{
			name: "named ports keep an unnamed port of a newer export out",
			records: []Record{
				record("a", 0, ports(tcp("http", 80))),
				record("b", 1, ports(tcp("", 81))),
			},
			want:         []mcsv1beta1.ServicePort{tcp("http", 80)},
			wantConflict: true,
			wantMessages: map[string]string{"b": `this export's "" TCP/81 clashes with "http" TCP/80 from cluster "a", which is used`},
		},
		{
			name: "a broken record's unnamed port beside named ones is dropped",
			records: []Record{
				record("a", 0, ports(tcp("", 80), tcp("http", 81))),
			},
			want: []mcsv1beta1.ServicePort{tcp("http", 81)},
		},
		{
			name:    "exports without ports",
			records: []Record{record("a", 0, ports()), record("b", 1, ports())},
			want:    []mcsv1beta1.ServicePort{},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			result := Merge(tc.records)
			if !reflect.DeepEqual(result.Spec.Ports, tc.want) {
				t.Fatalf("ports = %v, want %v", result.Spec.Ports, tc.want)
			}
			gotConflict := len(result.Reasons) == 1 && result.Reasons[0] == mcsv1beta1.ServiceExportReasonPortConflict
			if gotConflict != tc.wantConflict || (!tc.wantConflict && len(result.Reasons) != 0) {
				t.Fatalf("reasons = %v, want port conflict %v", result.Reasons, tc.wantConflict)
			}
			for cluster, fragment := range tc.wantMessages {
				c, _ := result.ConflictFor(cluster)
				if !strings.Contains(c.Message, fragment) {
					t.Errorf("cluster %s message %q lacks %q", cluster, c.Message, fragment)
				}
			}
		})
	}
}

func TestPortMessagesListAtMostAFewOwnLosses(t *testing.T) {
	var mine []mcsv1beta1.ServicePort
	var theirs []mcsv1beta1.ServicePort
	for i := range 6 {
		theirs = append(theirs, tcp(fmt.Sprintf("p%d", i), int32(100+i)))
		mine = append(mine, tcp(fmt.Sprintf("p%d", i), int32(200+i)))
	}
	result := Merge([]Record{record("a", 0, ports(theirs...)), record("b", 1, ports(mine...))})
	c, _ := result.ConflictFor("b")
	if strings.Count(c.Message, "clashes with") != messagePortLimit || !strings.Contains(c.Message, "and 3 more") {
		t.Fatalf("message = %q, want %d clashes and a count of the rest", c.Message, messagePortLimit)
	}
}
