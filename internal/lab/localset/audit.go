package localset

import (
	"os"
	"path/filepath"
)

// endpointSliceAuditPolicy records every EndpointSlice write once, when its response is sent, at
// the Metadata level (who wrote, which verb, the response code) and nothing else, so the log stays
// small however busy the cluster is; creates carry their request body too, as a slice created with
// a generated name is named only there (by its labels and name prefix).
const endpointSliceAuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted", "Panic"]
rules:
- level: Request
  verbs: ["create"]
  resources:
  - group: discovery.k8s.io
    resources: ["endpointslices"]
- level: Metadata
  verbs: ["update", "patch", "delete", "deletecollection"]
  resources:
  - group: discovery.k8s.io
    resources: ["endpointslices"]
- level: None
`

// AuditLog is where a member's API server writes its audit log when Up ran with
// Options.AuditEndpointSliceWrites: one JSON event per line.
func (cs *ClusterSet) AuditLog(member string) string {
	return filepath.Join(cs.Workdir, "audit-"+member+".log")
}

func writeAuditPolicy(workdir string) (string, error) {
	path := filepath.Join(workdir, "audit-policy.yaml")
	return path, os.WriteFile(path, []byte(endpointSliceAuditPolicy), 0o644)
}
