package statusview

import (
	"os"
	"path/filepath"
	"testing"
)

func TestReadAgentCountsEndpointsPerServicePort(t *testing.T) {
	path := filepath.Join(t.TempDir(), "node.nft")
	ruleset := `add table ip fleetslice
add chain ip fleetslice svc-N4UT23DAJPYZ-demo/api/tcp/grpc
add rule ip fleetslice svc-N4UT23DAJPYZ-demo/api/tcp/grpc meta l4proto tcp dnat ip addr . port to numgen random mod 2 map { 0 : 10.1.2.1 . 9090 , 1 : 10.1.2.2 . 9090 }
add rule ip fleetslice svc-Q7PNNJ3D4FDA-demo/cache/tcp/redis meta l4proto tcp dnat ip addr . port to numgen random mod 4 map @eps-Q7PNNJ3D4FDA-demo/cache/tcp/redis
add element ip fleetslice eps-Q7PNNJ3D4FDA-demo/cache/tcp/redis { 0 : 10.1.4.1 . 6379 }
add element ip fleetslice eps-Q7PNNJ3D4FDA-demo/cache/tcp/redis { 1 : 10.1.4.2 . 6379 }
add element ip fleetslice eps-Q7PNNJ3D4FDA-demo/cache/tcp/redis { 2 : 10.1.4.3 . 6379 }
add element ip fleetslice eps-Q7PNNJ3D4FDA-demo/cache/tcp/redis { 3 : 10.1.4.4 . 6379 }
add rule ip fleetslice svc-WWWWWWWWWWWW-demo/derived-abc/tcp/http meta l4proto tcp dnat ip addr . port to numgen random mod 4 map @eps-WWWWWWWWWWWW-demo/derived-abc/tcp/http
add element ip fleetslice eps-WWWWWWWWWWWW-demo/derived-abc/tcp/http { 0 : 10.1.5.1 . 8080 }
add element ip fleetslice eps-WWWWWWWWWWWW-demo/derived-abc/tcp/http { 1 : 10.1.5.1 . 8080 }
add element ip fleetslice eps-WWWWWWWWWWWW-demo/derived-abc/tcp/http { 2 : 10.1.5.1 . 8080 }
add element ip fleetslice eps-WWWWWWWWWWWW-demo/derived-abc/tcp/http { 3 : 10.2.5.1 . 8080 }
add rule ip fleetslice svc-B2P2ODBOTS52-demo/web/tcp/http meta l4proto tcp dnat ip addr . port to 10.1.0.4 . 8080
add rule ip fleetslice svc-C3F32EIXMGEY-demo/db/tcp/sql numgen random mod 3 == 0 meta l4proto tcp dnat ip to 10.1.3.1:5432
add rule ip fleetslice svc-C3F32EIXMGEY-demo/db/tcp/sql numgen random mod 2 == 0 meta l4proto tcp dnat ip to 10.1.3.2:5432
add rule ip fleetslice svc-C3F32EIXMGEY-demo/db/tcp/sql meta l4proto tcp dnat ip to 10.1.3.3:5432
add element ip fleetslice service-ips { 10.0.0.149 . tcp . 9090 : goto svc-N4UT23DAJPYZ-demo/api/tcp/grpc }
add element ip fleetslice cluster-endpoints-tcp { 10.0.0.150 . 80 . 0 : 10.1.6.1 . 8080 }
add element ip fleetslice cluster-endpoints-tcp { 10.0.0.150 . 80 . 1 : 10.1.6.1 . 8080 }
add element ip fleetslice cluster-endpoints-tcp { 10.0.0.150 . 80 . 2 : 10.1.6.2 . 8080 }
add element ip fleetslice cluster-endpoints-tcp { 10.0.0.151 . 80 . 0 : 10.1.7.1 . 8080 }
add element ip fleetslice cluster-endpoints-udp { 10.0.0.150 . 80 . 0 : 10.1.8.1 . 8080 }
add element ip fleetslice cluster-ports { 10.0.0.150 . tcp . 80 comment "demo/shared:http" }
add element ip fleetslice pick-cluster-tcp-3 { 10.0.0.150 . tcp . 80 }
add element ip fleetslice cluster-ports { 10.0.0.151 . tcp . 80 comment "demo/other:http" }
add element ip fleetslice pick-cluster-tcp-1 { 10.0.0.151 . tcp . 80 }
add rule ip fleetslice svc-AFFAFFAFFAFF-demo/sticky/tcp/http jump cluster-masquerade
add rule ip fleetslice svc-AFFAFFAFFAFF-demo/sticky/tcp/http meta l4proto tcp dnat ip to ip saddr map @aff-X-demo/sticky/tcp/http/60 : ip saddr map @affp-X-demo/sticky/tcp/http/60
add rule ip fleetslice svc-AFFAFFAFFAFF-demo/sticky/tcp/http goto pick-cluster-tcp-3
add element ip fleetslice service-ips { 10.0.0.152 . tcp . 80 comment "demo/sticky:http" : goto svc-AFFAFFAFFAFF-demo/sticky/tcp/http }
add element ip fleetslice cluster-endpoints-tcp { 10.0.0.152 . 80 . 0 : 10.1.9.1 . 8080 }
add element ip fleetslice cluster-endpoints-tcp { 10.0.0.152 . 80 . 1 : 10.1.9.2 . 8080 }
add element ip fleetslice cluster-endpoints-tcp { 10.0.0.152 . 80 . 2 : 10.1.9.3 . 8080 }
`
	if err := os.WriteFile(path, []byte(ruleset), 0o644); err != nil {
		t.Fatal(err)
	}
	a := ReadAgent("n", path)
	if a.Err != nil || a.Endpoints["demo/api:grpc"] != 2 || a.Endpoints["demo/web:http"] != 1 || a.Endpoints["demo/db:sql"] != 3 ||
		a.Endpoints["demo/cache:redis"] != 4 || a.Endpoints["demo/derived-abc:http"] != 2 ||
		a.Endpoints["demo/shared:http"] != 2 || a.Endpoints["demo/other:http"] != 1 || a.Endpoints["demo/sticky:http"] != 3 ||
		len(a.Endpoints) != 8 {
		t.Fatalf("ReadAgent = %+v", a)
	}
	weights, err := PortEndpoints(path)
	if err != nil || len(weights) != 3 || weights["demo/shared:http"]["10.1.6.1"] != 2 || weights["demo/shared:http"]["10.1.6.2"] != 1 ||
		len(weights["demo/other:http"]) != 1 {
		t.Fatalf("PortEndpoints = %v, %v", weights, err)
	}
	if missing := ReadAgent("n", filepath.Join(t.TempDir(), "none.nft")); missing.Err == nil {
		t.Fatal("a missing ruleset must say so")
	}
}
